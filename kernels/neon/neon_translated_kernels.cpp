// The NEON kernels (neon_isa.h) on x86 through SIMDe, built with -mavx2 -mfma -mf16c so that vfmaq_f32 maps
// to a fused multiply-add (without native FMA SIMDe would round the product separately, leaving the
// canonical order) and the conversions to SSE/AVX instructions.
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>

#if !defined(SIMDE_X86_FMA_NATIVE)
#error "NEON (translated) needs FMA (-mfma): vfmaq_f32 must be fused"
#endif

#include "kernels/neon/neon_isa.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {
constexpr KernelSet kNeonTranslated = generic::make_kernel_set<NeonIsa>();
}  // namespace

const KernelSet& neon_translated_kernel_set() { return kNeonTranslated; }

}  // namespace colibri::kernels
