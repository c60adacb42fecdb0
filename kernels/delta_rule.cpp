#include "kernels/delta_rule.h"

#include <cmath>

// The versions each function is compiled in (delta_rule.h); elsewhere (aarch64, clang) the one baseline build.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COLIBRI_DELTA_CLONES [[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]]
#else
#define COLIBRI_DELTA_CLONES
#endif

namespace colibri::kernels {

COLIBRI_DELTA_CLONES void gated_delta_step(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                                           size_t dk, size_t dv, float* out, float* scratch) {
    // Decay the state and read what it holds for k: kv[d] = Σ_i S[i][d]·k[i], rows in order.
    float* kv = scratch;
    for (size_t d = 0; d < dv; ++d) kv[d] = 0.0f;
    for (size_t i = 0; i < dk; ++i) {
        float* row = state + i * dv;
        const float ki = k[i];
        for (size_t d = 0; d < dv; ++d) {
            row[d] *= decay;
            kv[d] += row[d] * ki;
        }
    }
    for (size_t d = 0; d < dv; ++d) kv[d] = (v[d] - kv[d]) * beta;  // the delta
    // Write the delta along k and read the output along q: out[d] = Σ_i S[i][d]·q[i].
    for (size_t d = 0; d < dv; ++d) out[d] = 0.0f;
    for (size_t i = 0; i < dk; ++i) {
        float* row = state + i * dv;
        const float ki = k[i], qi = q[i];
        for (size_t d = 0; d < dv; ++d) {
            row[d] += ki * kv[d];
            out[d] += row[d] * qi;
        }
    }
}

COLIBRI_DELTA_CLONES void causal_conv_silu(const float* window, const float* weight, size_t channels, size_t kernel, float* out) {
    for (size_t c = 0; c < channels; ++c) out[c] = 0.0f;
    for (size_t i = 0; i < kernel; ++i) {
        const float* row = window + i * channels;
        for (size_t c = 0; c < channels; ++c) out[c] += weight[c * kernel + i] * row[c];
    }
    for (size_t c = 0; c < channels; ++c) out[c] = out[c] / (1.0f + std::exp(-out[c]));
}

}  // namespace colibri::kernels
