// The kernel sets each variant's translation unit exports. Which ones exist in a build is told by the
// COLIBRI_KERNELS_HAVE_* definitions kernels/CMakeLists.txt sets; only kernels/registry.cpp uses these.
#pragma once
#include "kernel_set.h"

namespace colibri::kernels {

const KernelSet& scalar_kernel_set();
const KernelSet& avx2_kernel_set();             // AVX2 + FMA + F16C
const KernelSet& avx512_kernel_set();           // AVX-512 F/BW/VL (+ FMA, F16C); VNNI when CPUID has it
const KernelSet& avx512_no_vnni_kernel_set();   // the same without VNNI (what a CPU lacking AVX512_VNNI runs)
const KernelSet& avx512_other_prefetch_kernel_set();  // avx512_kernel_set with q4_K's other prefetch hint (T0/NTA)
const KernelSet& neon_kernel_set();             // native NEON (aarch64)
const KernelSet& neon_translated_kernel_set();  // the NEON source through SIMDe on x86 (AVX2 + FMA + F16C)

}  // namespace colibri::kernels
