#include "engine/core/matmul_jobs.h"

#include <algorithm>

#include "engine/core/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/matvec.h"

namespace colibri {

namespace {
// Work units per task below which splitting does not pay for the hand-off (about 16K multiply-adds).
constexpr size_t kMinUnitsPerTask = 16384;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Splits the work of `jobs` (rows_of(job) rows of units_per_row(job) units each, jobs one after another)
// into the pool's parts and calls body(job, lo, hi) for the rows [lo, hi) of each job a part owns. Row r of
// a job belongs to the part that holds its first unit.
template <class Job, class RowsOf, class UnitsPerRow, class Body>
void run_row_ranges(ThreadPool& pool, std::span<const Job> jobs, RowsOf rows_of, UnitsPerRow units_per_row, Body body) {
    size_t total = 0;
    for (const Job& j : jobs) total += rows_of(j) * units_per_row(j);
    // Balanced: a row is the same kernel call whichever part computes it, so the split may follow the threads'
    // speeds (engine/core/thread_pool.h).
    pool.parallel_for(total, kMinUnitsPerTask, [&](size_t b, size_t e) {
        size_t start = 0;  // first unit of the current job
        for (const Job& j : jobs) {
            const size_t rows = rows_of(j), per_row = units_per_row(j);
            const size_t lo = b > start ? ceil_div(b - start, per_row) : 0;
            const size_t hi = e > start ? std::min(rows, ceil_div(e - start, per_row)) : 0;
            if (lo < hi) body(j, lo, hi);
            start += rows * per_row;
            if (start >= e) break;
        }
    }, ThreadPool::Split::Balanced);
}

}  // namespace

void product_rows(const TensorView& w, const float* x, uint32_t n, float* y, size_t lo, size_t hi) {
    if (n == 1)
        kernels::matvec_rows(w.type, w.data, w.cols, x, y + lo, lo, hi);
    else
        kernels::matmul_rows(w.type, w.data, w.cols, x, n, y + lo, w.rows, lo, hi);
}

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs) {
    run_row_ranges(
        pool, jobs, [](const MatmulJob& j) { return size_t(j.w->rows); },
        [](const MatmulJob& j) { return size_t(j.n) * j.w->cols; },
        [](const MatmulJob& j, size_t lo, size_t hi) { product_rows(*j.w, j.x, j.n, j.y, lo, hi); });
}

void run_gated_matmuls(ThreadPool& pool, std::span<const GatedJob> jobs) {
    run_row_ranges(
        pool, jobs, [](const GatedJob& j) { return size_t(j.gate->rows); },
        [](const GatedJob& j) { return 2 * size_t(j.n) * j.gate->cols; },  // both projections
        [](const GatedJob& j, size_t lo, size_t hi) {
            const size_t F = j.gate->rows;
            product_rows(*j.gate, j.x, j.n, j.out, lo, hi);
            product_rows(*j.up, j.x, j.n, j.up_out, lo, hi);
            for (size_t i = 0; i < j.n; ++i) {
                float* g = j.out + i * F + lo;
                float* u = j.up_out + i * F + lo;
                // Biases are per expert; a shared expert or dense MLP beside clamped experts has none.
                if (j.gate_bias)
                    for (size_t r = 0; r < hi - lo; ++r) g[r] += j.gate_bias[lo + r];
                if (j.up_bias)
                    for (size_t r = 0; r < hi - lo; ++r) u[r] += j.up_bias[lo + r];
                if (j.limit > 0.0f) {
                    swiglu_oai(g, u, hi - lo, j.limit);
                } else {
                    silu_mul(g, u, hi - lo);
                }
            }
        });
}

}  // namespace colibri
