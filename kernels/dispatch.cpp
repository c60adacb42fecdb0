// The public entry points: straight through to the active variant (kernels/registry.h).
#include "kernels/matmul.h"
#include "kernels/matvec.h"
#include "kernels/registry.h"

namespace colibri::kernels {

void matvec_rows(WeightType type, const void* w, size_t cols, const float* x, float* y, size_t row_begin,
                 size_t row_end) {
    if (row_begin >= row_end) return;
    active_matvec(type)(w, cols, x, y, row_begin, row_end);
}

void matmul_rows(WeightType type, const void* w, size_t cols, const float* x, size_t n, float* y, size_t ldy,
                 size_t row_begin, size_t row_end) {
    if (row_begin >= row_end || n == 0) return;
    active_matmul(type)(w, cols, x, n, y, ldy, row_begin, row_end);
}

void weighted_rows(const float* m, size_t ld, size_t rows, size_t cols, const float* a, size_t lda, size_t n,
                   float* out, size_t ldo) {
    if (n == 0 || cols == 0) return;
    active_weighted_rows()(m, ld, rows, cols, a, lda, n, out, ldo);
}

uint64_t stream_sum(const void* p, size_t bytes, size_t streams, bool prefetch) {
    return active_stream_sum()(static_cast<const uint8_t*>(p), bytes, streams, prefetch);
}

}  // namespace colibri::kernels
