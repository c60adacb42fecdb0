// Kernel variants and which one runs. Every variant implements matvec and matmul for every weight type in
// the canonical reduction order (kernels/canonical.h), so all of them give bit-identical results and the
// choice is about speed only. The active choice is per (op, weight type): by default the best variant the
// CPU supports (CPUID), overridden by COLIBRI_KERNEL=scalar|avx2|avx512|neon|neon_translated, by the
// auto-tuner's cache (kernels/tuner.h) or programmatically (tests, the Studio).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_set.h"
#include "types.h"

namespace colibri::kernels {

enum class Variant : unsigned { Scalar, Avx2, Avx512, Neon, NeonTranslated };
inline constexpr size_t kVariantCount = 5;

enum class Op : unsigned { Matvec, Matmul };
inline constexpr size_t kOpCount = 2;

const char* variant_name(Variant v);          // "scalar", "avx2", "avx512", "neon", "neon_translated"
const char* variant_display_name(Variant v);  // "Scalar", "AVX2", "AVX-512", "NEON", "NEON (translated)"
bool variant_from_name(std::string_view name, Variant* out);
const char* op_name(Op op);  // "matvec", "matmul"
const char* weight_type_label(WeightType type);  // the table's label: "f32", ..., "q4_K" (kernels/weight_types.h)
bool op_from_name(std::string_view name, Op* out);

bool variant_compiled(Variant v);   // built into this binary (CMake options, target architecture)
bool variant_supported(Variant v);  // compiled, and this CPU can run it
std::vector<Variant> supported_variants();  // in enum order
Variant best_variant();  // the widest supported native ISA

// The variant's table; nullptr unless the variant is supported.
const KernelSet* kernel_set(Variant v);

// Selection. These return false (and change nothing) for a variant this CPU cannot run.
bool select_variant(Variant v);                        // for every op and type
bool select_variant(Op op, WeightType type, Variant v);
Variant selected_variant(Op op, WeightType type);
void select_best();  // back to the CPUID default

// COLIBRI_KERNEL: applies it when set; returns true when applied or unset, false with `error` =
// "COLIBRI_KERNEL: <why>" (and nothing changed) when it names an unknown or unsupported variant. The first kernel call applies it
// too (printing that error to stderr, then using the default), so a front end calls this first to fail early.
bool apply_kernel_environment(std::string* error);
bool kernel_environment_set();  // COLIBRI_KERNEL is set and not empty: it beats the tune cache

// Tests: the AVX-512 variant's path for CPUs without AVX512_VNNI (vpmaddubsw instead of vpdpbusd), so that a
// VNNI machine checks it too; nullptr unless the AVX-512 variant is supported.
const KernelSet* avx512_no_vnni_kernel_set_for_tests();
// Tests: the AVX-512 variant with q4_K's matvec prefetching with the hint this CPU does not get (T0 on AMD,
// non-temporal elsewhere: kernels/avx512), so that both are checked on any machine; nullptr as above.
const KernelSet* avx512_other_prefetch_kernel_set_for_tests();

// The active functions (what matvec_rows/matmul_rows call).
MatvecFn active_matvec(WeightType type);
MatmulFn active_matmul(WeightType type);
WeightedRowsFn active_weighted_rows();  // the f32 matvec's variant
StreamSumFn active_stream_sum();        // likewise

}  // namespace colibri::kernels
