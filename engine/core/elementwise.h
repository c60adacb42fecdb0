// The element-wise and reduction loops a token runs outside the matrix products: rmsnorm, the attention
// softmax and the SwiGLU activation (silu_mul).
//
// The engine is built for the architecture's baseline (SSE2 on x86-64), so that one binary runs anywhere; these
// loops are also compiled for x86-64-v3 (AVX2) and x86-64-v4 (AVX-512), and the loader picks the widest the
// CPU has (GCC function multiversioning, an ifunc per function). Every version does the same IEEE operations
// per element in the same order: the engine is built with -ffp-contract=off, so no version fuses a·b + c, and
// the sums and maxima go through lane_fold's fixed 16 lanes whatever the vector width. So the bits are the
// baseline's (test_session checks each function against a plain loop), only the speed differs.
#pragma once
#include <cstddef>
#include <cstdint>

namespace colibri {

// HF RMSNorm: out = weight · (x · 1/sqrt(mean(x²) + eps)), in f32; the sum of squares by lane_fold's order.
void rmsnorm(const float* x, const float* weight, float eps, size_t n, float* out);
// Softmax of one head's scores, scaled first: v[p] ← e^(scale·v[p] − max) / Σ, the exponentials by fast_exp.
void attention_softmax(float* v, uint32_t n, float scale);
// The same with a learned sink logit (gpt_oss): the softmax runs over the n scaled scores and `sink`, whose share
// is dropped, so the n probabilities sum to less than 1.
void attention_softmax_sink(float* v, uint32_t n, float scale, float sink);
// gate[i] ← silu(gate[i]) · up[i] = gate[i] / (1 + e^−gate[i]) · up[i], the SwiGLU activation.
void silu_mul(float* gate, const float* up, size_t n);
// gpt_oss's clamped SwiGLU: g = min(gate[i], limit), u = clamp(up[i], ±limit), gate[i] ← (u + 1) · g · σ(1.702 g).
void swiglu_oai(float* gate, const float* up, size_t n, float limit);

// Folds f(v[i]) for i < n with op in a fixed order: 16 interleaved lanes (element i goes to lane i % 16, each
// lane starting from init), then the lanes combined pairwise (j + 8, j + 4, j + 2, j + 1). The compiler makes
// the lanes vector registers, so a sum over the hidden size is 64 dependent adds instead of 1024 (about 1 µs
// each time, twice per layer and again in every attention head's softmax); the order is the code's, so the
// bits are the same on every run, thread count and vector width.
template <class F, class Op>
float lane_fold(const float* v, size_t n, float init, F f, Op op) {
    constexpr size_t kLanes = 16;
    float acc[kLanes];
    for (float& a : acc) a = init;
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) acc[j] = op(acc[j], f(v[i + j]));
    for (size_t j = 0; i + j < n; ++j) acc[j] = op(acc[j], f(v[i + j]));
    for (size_t w = kLanes / 2; w > 0; w /= 2)
        for (size_t j = 0; j < w; ++j) acc[j] = op(acc[j], acc[j + w]);
    return acc[0];
}

}  // namespace colibri
