// Native NEON (aarch64). The kernels themselves are in neon_isa.h, shared with the SIMDe build on x86.
#include <arm_neon.h>

#include "kernels/neon/neon_isa.h"
#include "kernels/variants.h"

namespace colibri::kernels {
namespace {
constexpr KernelSet kNeon = generic::make_kernel_set<NeonIsa>();
}  // namespace

const KernelSet& neon_kernel_set() { return kNeon; }

}  // namespace colibri::kernels
