// The function table one kernel variant (scalar, AVX2, ...) provides: matvec and matmul per weight type.
#pragma once
#include <cstddef>
#include <cstdint>

#include "canonical.h"
#include "types.h"
#include "weight_types.h"

namespace colibri::kernels {

using colibri::kWeightTypeCount;  // rows of the weight-type table

// y[r - row_begin] = dot(row r, x) for r in [row_begin, row_end).
using MatvecFn = void (*)(const void* w, size_t cols, const float* x, float* y, size_t row_begin,
                          size_t row_end);
// y[i * ldy + (r - row_begin)] = dot(row r, x + i * cols) for i < n, r in [row_begin, row_end).
using MatmulFn = void (*)(const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy,
                          size_t row_begin, size_t row_end);

// out[i * ldo + c] = Σ_{r < rows} a[i * lda + r] · m[r * ld + c] for i < n, c < cols (canonical.h, 3).
using WeightedRowsFn = void (*)(const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda,
                                size_t n, float* out, size_t ldo);

// Σ of the 64-bit words of `bytes` bytes (a multiple of 64) read as `streams` (1, 2 or 4) sequential streams
// side by side, with the variant's widest loads and, with `prefetch`, a software prefetch kStreamPrefetch bytes
// ahead in each stream: the memory-bandwidth probe of `colibri bench`.
using StreamSumFn = uint64_t (*)(const uint8_t* p, size_t bytes, size_t streams, bool prefetch);
inline constexpr size_t kStreamPrefetch = 1024;

struct KernelSet {
    MatvecFn matvec[kWeightTypeCount];
    MatmulFn matmul[kWeightTypeCount];
    // The block types' activation quantisation this variant's kernels use (canonical::quantize_blocks or a
    // vector version giving the same bytes).
    canonical::QuantizeBlocksFn quantize;
    WeightedRowsFn weighted_rows;
    StreamSumFn stream_sum;
};

}  // namespace colibri::kernels
