// Matrix-vector products for decode: y = W x with W stored row-major (rows = outputs) in any weight type.
// Every output element is reduced in one canonical order (kernels/canonical.h) by whichever variant
// kernels/registry.h selected, so results depend neither on how rows are split among threads nor on the
// variant. For the block types (q8_0, q4_0, q4_K) `cols` is a multiple of the type's block size
// (kernels/types.h); the loader guarantees it (format::tensor_bytes). For those types x is first quantised
// to 8 bits per block of 32 inside the call (canonical.h, 2), so the result is not the f32 dot product but
// that of the row with d_x·q.
#pragma once
#include <cstddef>

#include "types.h"

namespace colibri::kernels {

// y[r - row_begin] = dot(row r of W, x) for r in [row_begin, row_end). W has `cols` columns.
void matvec_rows(WeightType type, const void* w, size_t cols, const float* x, float* y,
                 size_t row_begin, size_t row_end);

// The transposed product in f32: out[i * ldo + c] = Σ_{r < rows} a[i * lda + r] · m[r * ld + c] for i < n and
// c < cols, every element one fma chain over r in increasing order (kernels/canonical.h, 3), so the same bits
// in every variant. Attention's scores (keys stored transposed) and its weighted sum of the values. Runs in
// the variant selected for the f32 matvec.
void weighted_rows(const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda, size_t n,
                   float* out, size_t ldo);

// Σ of the 64-bit words of [p, p + bytes) (bytes a multiple of 64) read as `streams` (1, 2 or 4) sequential
// streams side by side with the widest loads of the f32 matvec's variant, with `prefetch` also prefetching
// kStreamPrefetch bytes ahead in each stream: the probe `colibri bench` measures the machine's read bandwidth
// with (the kernels read their weights as several streams too).
uint64_t stream_sum(const void* p, size_t bytes, size_t streams, bool prefetch);

// Row r of W converted to f32 (for embedding lookups).
void dequantize_row(WeightType type, const void* w, size_t cols, size_t row, float* out);

// Bytes of one row of `cols` elements.
size_t row_bytes(WeightType type, size_t cols);

}  // namespace colibri::kernels
