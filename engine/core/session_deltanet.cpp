// The Gated DeltaNet token mixer (Qwen3-Next, Qwen3.5): linear attention with a recurrent state per value head.
// The projections read their weights once per chunk (the pool's matmuls); the recurrence runs token by token in
// position order, each value head on one pool part, so a prompt evaluated whole, in chunks of any size or token by
// token, on any number of threads, leaves the same state bits and gives the same logits.
#include <algorithm>
#include <cmath>

#include "engine/core/elementwise.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/session.h"
#include "engine/core/session_internal.h"
#include "kernels/delta_rule.h"

namespace colibri {

using namespace format;
using namespace session_internal;

namespace {

constexpr float kL2Eps = 1e-6f;  // transformers' l2norm in the delta rule

// x ← x · rsqrt(Σx² + eps) · scale over n values.
void l2_normalise(float* x, size_t n, float scale) {
    const float ss = lane_fold(x, n, 0.0f, [](float a) { return a * a; }, [](float a, float b) { return a + b; });
    const float inv = 1.0f / std::sqrt(ss + kL2Eps);
    for (size_t i = 0; i < n; ++i) x[i] = x[i] * inv * scale;
}

// torch's softplus (threshold 20: above it, x itself).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// √Σx², accumulated in double: what the Studio shows of a head's state, not part of the computation.
float frobenius_norm(const float* x, size_t n) {
    double ss = 0.0;
    for (size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    return static_cast<float>(std::sqrt(ss));
}

}  // namespace

size_t Session::linear_state_floats(const HyperParams& hp) {
    const size_t channels = schema::linear_conv_channels(hp);
    return (size_t(hp.linear_conv_kernel) - 1) * channels + size_t(hp.linear_value_heads) * hp.linear_key_dim * hp.linear_value_dim;
}

void Session::size_linear_buffers() {
    const HyperParams& hp = model_.hparams();
    const ActivationAllocator<float> alloc(options_.huge_pages);
    auto sized = [&](ActivationBuffer<float>& b, size_t n) {
        b = ActivationBuffer<float>(alloc);
        b.resize(n);
    };
    const size_t C = capacity_, channels = schema::linear_conv_channels(hp), nv = hp.linear_value_heads;
    sized(lin_window_, (C + hp.linear_conv_kernel - 1) * channels);
    sized(lin_conv_, C * channels);
    sized(lin_z_, C * nv * hp.linear_value_dim);
    sized(lin_b_, C * nv);
    sized(lin_a_, C * nv);
    sized(lin_scratch_, size_t(pool_.size()) * hp.linear_value_dim);
    sized(lin_norms_, C * nv);
}

std::span<const float> Session::linear_recurrent_state(uint32_t layer) const {
    if (layer >= caches_.size() || model_.layers()[layer].mixer != TokenMixer::GatedDeltaNet) return {};
    const HyperParams& hp = model_.hparams();
    const size_t conv = (size_t(hp.linear_conv_kernel) - 1) * schema::linear_conv_channels(hp);
    return {linear_state_.data() + caches_[layer].state_offset + conv, size_t(hp.linear_value_heads) * hp.linear_key_dim * hp.linear_value_dim};
}

void Session::delta_recurrence(float* recurrent, const float* conv, const float* beta, const float* decay, uint32_t n, float* out,
                               float* norms) {
    // Each value head's tokens in order on one part; value head j reads key head j / ratio (Hugging Face's grouped
    // order) or j % nk (tiled, as llama.cpp stores Qwen3.5).
    const HyperParams& hp = model_.hparams();
    const size_t nk = hp.linear_key_heads, nv = hp.linear_value_heads, dk = hp.linear_key_dim, dv = hp.linear_value_dim;
    const size_t channels = schema::linear_conv_channels(hp), ratio = nv / nk;
    const bool tiled = model_.rules().attention.linear_tiled;
    const size_t parts = std::min<size_t>(pool_.size(), nv);
    pool_.parallel_for(parts, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t part = part_begin; part < part_end; ++part) {
            float* scratch = lin_scratch_.data() + part * dv;
            for (size_t j = nv * part / parts; j < nv * (part + 1) / parts; ++j) {
                float* state = recurrent + j * dk * dv;
                for (uint32_t t = 0; t < n; ++t) {
                    const float* x = conv + size_t(t) * channels;
                    const size_t kh = tiled ? j % nk : j / ratio;
                    const float* q = x + kh * dk;
                    const float* k = x + (nk + kh) * dk;
                    const float* v = x + 2 * nk * dk + j * dv;
                    kernels::gated_delta_step(state, q, k, v, decay[size_t(t) * nv + j], beta[size_t(t) * nv + j], dk, dv,
                                              out + size_t(t) * nv * dv + j * dv, scratch);
                    if (norms) norms[size_t(t) * nv + j] = frobenius_norm(state, dk * dv);
                }
            }
        }
    });
}

void Session::gated_deltanet(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const size_t nk = hp.linear_key_heads, nv = hp.linear_value_heads, dk = hp.linear_key_dim, dv = hp.linear_value_dim;
    const size_t K = hp.linear_conv_kernel, channels = schema::linear_conv_channels(hp);
    float* conv_state = linear_state_.data() + caches_[layer].state_offset;  // [K - 1][channels]
    float* recurrent = conv_state + (K - 1) * channels;                      // [value head][dk][dv]
    if (position_ == 0) std::fill_n(conv_state, linear_state_floats(hp), 0.0f);
    // Observed: each step's time (LayerTiming::deltanet_ns) and each head's state norm (LinearStateRecord).
    const bool observed = observer_ != nullptr;  // the state is only read: the logits stay the same
    uint64_t t_step = observed ? now_ns() : 0;
    const auto step_done = [&](DeltaNetStep step) {
        if (!observed) return;
        const uint64_t t = now_ns();
        deltanet_ns_[static_cast<size_t>(step)] += t - t_step;
        t_step = t;
    };

    // The projections, the chunk's q|k|v rows after the conv state's in the conv's window.
    float* window = lin_window_.data();
    std::copy_n(conv_state, (K - 1) * channels, window);
    const MatmulJob jobs[4] = {{w.lin_qkv, h_.data(), n, window + (K - 1) * channels},
                               {w.lin_z, h_.data(), n, lin_z_.data()},
                               {w.lin_beta, h_.data(), n, lin_b_.data()},
                               {w.lin_alpha, h_.data(), n, lin_a_.data()}};
    run_matmuls(pool_, jobs);
    std::copy_n(window + size_t(n) * channels, (K - 1) * channels, conv_state);  // the last K - 1 inputs
    step_done(DeltaNetStep::InProjections);

    // Per token: conv + SiLU; q and k of each key head L2-normalised (q scaled by dk^-1/2).
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
    for (uint32_t t = 0; t < n; ++t) {
        float* x = lin_conv_.data() + size_t(t) * channels;
        kernels::causal_conv_silu(window + size_t(t) * channels, f32(w.lin_conv), channels, K, x);
        for (size_t h = 0; h < nk; ++h) {
            l2_normalise(x + h * dk, dk, q_scale);
            l2_normalise(x + (nk + h) * dk, dk, 1.0f);
        }
    }
    step_done(DeltaNetStep::Conv);
    // β = σ(b) and the decay exp(A·softplus(a + dt_bias)) of each value head (A = −exp(A_log), stored so).
    const float* ssm_a = f32(w.lin_ssm_a);
    const float* dt_bias = f32(w.lin_dt_bias);
    for (size_t i = 0; i < size_t(n) * nv; ++i) {
        const size_t j = i % nv;
        lin_b_[i] = sigmoid(lin_b_[i]);
        lin_a_[i] = std::exp(ssm_a[j] * softplus(lin_a_[i] + dt_bias[j]));
    }
    step_done(DeltaNetStep::Gates);

    if (verifying_) keep_deltanet_inputs(layer, n);
    delta_recurrence(recurrent, lin_conv_.data(), lin_b_.data(), lin_a_.data(), n, att_.data(), observed ? lin_norms_.data() : nullptr);
    step_done(DeltaNetStep::DeltaRule);
    // The gated norm of every (token, value head): RMSNorm over the head's dv values (plain weight), then × SiLU(z).
    const size_t rows = size_t(n) * nv, norm_parts = std::min<size_t>(pool_.size(), rows);
    pool_.parallel_for(norm_parts, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t r = rows * part_begin / norm_parts; r < rows * part_end / norm_parts; ++r) {
            float* out = att_.data() + r * dv;
            const float* z = lin_z_.data() + r * dv;
            rmsnorm(out, f32(w.lin_norm), hp.rms_eps, dv, out);
            for (size_t d = 0; d < dv; ++d) out[d] *= z[d] * sigmoid(z[d]);
        }
    });
    step_done(DeltaNetStep::GatedNorm);
    if (observed)
        for (uint32_t t = 0; t < n; ++t) {
            const size_t row = size_t(t) * nv;
            observer_->on_linear_state(LinearStateRecord{layer, position_ + t, {lin_norms_.data() + row, nv}, {lin_b_.data() + row, nv},
                                                         {lin_a_.data() + row, nv}});
        }
    t_step = observed ? now_ns() : 0;  // the records above are the observer's time, not a step's
    output_projection(w, n);
    step_done(DeltaNetStep::OutProjection);
}

}  // namespace colibri
