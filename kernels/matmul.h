// Matrix-matrix products for prompt evaluation: n input vectors against one weight matrix, each weight row
// read from memory once for all n vectors. Every y element is bit-identical to what matvec_rows gives for
// that vector (kernels/canonical.h), so batched prompt evaluation and token-by-token evaluation agree.
#pragma once
#include <cstddef>

#include "types.h"

namespace colibri::kernels {

// For i < n and r in [row_begin, row_end): y[i * ldy + (r - row_begin)] = dot(row r of W, x + i * cols).
// W has `cols` columns (a multiple of the block size for block types); ldy ≥ row_end − row_begin.
void matmul_rows(WeightType type, const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy,
                 size_t row_begin, size_t row_end);

}  // namespace colibri::kernels
