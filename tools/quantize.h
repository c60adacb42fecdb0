// Quantisation of f32 rows into the block types of kernels/types.h (layouts: docs/FORMAT.md, "Weight types";
// choices and measurements: docs/QUANTIZATION.md).
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/base/status.h"
#include "kernels/types.h"

namespace colibri::tools {

// The type a matrix with `cols` columns is stored in when `requested` is asked for. Block types need whole
// blocks per row: q4_k falls back to q4_0 for rows that are a multiple of 32 but not of 256, and every block
// type falls back to f16 for rows that are not a multiple of 32. Other types are returned unchanged.
WeightType storage_type(WeightType requested, uint64_t cols);

// Quantises one row of n values into `type` (any weight type; n a multiple of its block size) through the type's
// entry point (kernels/weight_types.h; the block quantisers' methods: kernels/quantize.cpp), writing
// kernels::row_bytes(type, n) bytes to out. Fails with a one-line message naming the column on a NaN or an
// infinity, and on values too large for the type's scales (or, for f16 and bf16, its range); then `out` holds
// nothing meaningful.
//   q8_0: per block of 32 an f16 scale d and 32 int8 q in [-127, 127], x ≈ d·q. The scale is searched: besides
//         max|x|/127 (ggml's choice), a few larger candidates and the least-squares scale for each candidate's
//         levels, keeping the one whose stored (f16) scale gives the smallest squared error.
//   q4_0: per block of 32 an f16 scale d and 32 nibbles q, x ≈ d·(q − 8). Scale searched as for q8_0, with the
//         block's largest-magnitude value mapped near level −8 or +7 (either sign of d), slight clipping allowed.
//   q4_K: per super-block of 256 an f16 d and dmin, 8 sub-blocks of 32 with 6-bit scale sc and min mn, and 4-bit
//         q: x ≈ d·sc·q − dmin·mn. Each sub-block's (scale, min) minimises its squared error by a search over
//         initial scales refined by alternating least squares; never worse than min/max scaling.
//   q5_K: q4_K with 5-bit q (0..31), the same search; ggml's Q5_K layout.
//   q6_K: per group of 16 an int8 scale sc under one f16 d per 256, 6-bit q: x ≈ d·sc·(q − 32). Each group's step
//         is searched as q4_0's, then rounded to the int8 code (of the two neighbours) with the least error.
//   mxfp4: per block of 32 an e8m0 exponent e and e2m1 values v: x ≈ 2^(e − 127)·v; three exponents tried around
//         the one that holds max|x|, nearest grid points, the least squared error kept.
Status quantize_row(WeightType type, const float* values, size_t n, uint8_t* out);

}  // namespace colibri::tools
