// The one reduction order every kernel variant follows, so that scalar, AVX2, AVX-512 and NEON give
// bit-identical dot products (and the tuner's choice of variant can never change logits).
//
// dot(w, x) over `cols` columns, with w the row as dequantize_row gives it (exact in f32 for every type):
//   lane k (0..15) starts at +0 and takes, for c = k, k + 16, k + 32, ... in increasing c,
//   lane[k] = fma(w[c], x[c], lane[k]);
//   the 16 lanes are then summed pairwise by halving: lane[k] += lane[k + 8], then + 4, + 2, + 1.
// A 512-bit register, two 256-bit or four 128-bit ones hold the 16 lanes; a scalar loop with std::fma
// emulates them. Dequantised weights are exact (q8_0: d·q, q4_0: d·(q − 8), q4_K: (d·sc)·q − dmin·mn with an
// exact product, so fused or not it rounds once), hence decoding in registers changes nothing either.
#pragma once
#include <cstddef>

namespace colibri::kernels::canonical {

inline constexpr size_t kLanes = 16;

namespace {  // internal linkage: each ISA's translation unit keeps its own copy (no ODR mixing of flags)

inline float sum_lanes(float* lane) {
    for (size_t half = kLanes / 2; half > 0; half /= 2) {
        for (size_t k = 0; k < half; ++k) lane[k] = lane[k] + lane[k + half];
    }
    return lane[0];
}

}  // namespace
}  // namespace colibri::kernels::canonical
