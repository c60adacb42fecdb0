#include "matmul_jobs.h"

#include <algorithm>

#include "kernels/matmul.h"
#include "kernels/matvec.h"


namespace colibri {

namespace {
// Work units per task below which splitting does not pay for the hand-off (about 16K multiply-adds).
constexpr size_t kMinUnitsPerTask = 16384;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
}  // namespace

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs) {
    size_t total = 0;
    for (const MatmulJob& j : jobs) total += size_t(j.w->rows) * j.n * j.w->cols;
    pool.parallel_for(total, kMinUnitsPerTask, [&](size_t b, size_t e) {
        size_t start = 0;  // first unit of the current job
        for (const MatmulJob& j : jobs) {
            const size_t rows = j.w->rows, cols = j.w->cols, per_row = size_t(j.n) * cols;
            const size_t end = start + rows * per_row;
            // Row r belongs to the task that holds its first unit, start + r * per_row.
            const size_t lo = b > start ? ceil_div(b - start, per_row) : 0;
            const size_t hi = e > start ? std::min(rows, ceil_div(e - start, per_row)) : 0;
            if (lo < hi) {
                if (j.n == 1)
                    kernels::matvec_rows(j.w->type, j.w->data, cols, j.x, j.y + lo, lo, hi);
                else
                    kernels::matmul_rows(j.w->type, j.w->data, cols, j.x, j.n, j.y + lo, rows, lo, hi);
            }
            start = end;
            if (start >= e) break;
        }
    });
}

}  // namespace colibri
