// Several independent matrix products run as one parallel_for: one thread hand-off for, e.g., the q, k and v
// projections, or the gate and up projections of every expert a chunk selected. The work (rows x vectors x
// columns) is split into one fixed range per pool part; each row of each job goes to exactly one part and is
// computed by the same kernel call a lone product would make for it, so results do not depend on how jobs
// are grouped or on the thread count.
#pragma once
#include <cstdint>
#include <span>

#include "engine/core/thread_pool.h"
#include "engine/file/model_file.h"

namespace colibri {

// Rows [lo, hi) of w against n vectors: y[i * w.rows + r] for r in [lo, hi), the kernel call every split of a
// product makes for those rows (so the bits do not depend on who computes them).
void product_rows(const TensorView& w, const float* x, uint32_t n, float* y, size_t lo, size_t hi);

struct MatmulJob {
    const TensorView* w;  // rows x cols
    const float* x;       // n vectors of w->cols floats
    uint32_t n;
    float* y;             // y[i * w->rows + r] = row r of w . x_i
};

void run_matmuls(ThreadPool& pool, std::span<const MatmulJob> jobs);

// The first half of a SwiGLU FFN: the gate and up projections and the activation between them,
//   out[i * F + r] = silu(gate_r . x_i) * (up_r . x_i)   for i < n, r < F (F = gate->rows = up->rows).
// A part computes both projections for its rows and then their product, so the activation runs in
// parallel with no pass (and no hand-off) of its own. up_out is scratch of the same size as out.
struct GatedJob {
    const TensorView* gate;
    const TensorView* up;
    const float* x;  // n vectors of gate->cols floats
    uint32_t n;
    float* out;
    float* up_out;
    // gpt_oss: biases added to both projections, then the clamped activation (swiglu_oai) instead of SwiGLU.
    const float* gate_bias = nullptr;
    const float* up_bias = nullptr;
    float limit = 0.0f;  // > 0: swiglu_oai with this limit
};

void run_gated_matmuls(ThreadPool& pool, std::span<const GatedJob> jobs);

}  // namespace colibri
