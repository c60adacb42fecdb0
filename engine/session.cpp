#include "session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <shared_mutex>

#include "kernels/matvec.h"

namespace colibri {

using namespace format;

namespace {

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

const float* f32(const TensorView* t) { return static_cast<const float*>(t->data); }

// HF RMSNorm: weight * (x * rsqrt(mean(x^2) + eps)), in f32.
void rmsnorm(const float* x, const float* weight, float eps, size_t n, float* out) {
    float ss = 0.0f;
    for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (size_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv);
}

// rotate_half convention: pairs (i, i + d/2).
void rope(float* v, const float* inv_freq, uint32_t head_dim, uint32_t position) {
    const uint32_t half = head_dim / 2;
    for (uint32_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(position) * inv_freq[i];
        const float c = std::cos(angle), s = std::sin(angle);
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
    }
}

void softmax(float* v, size_t n) {
    float mx = v[0];
    for (size_t i = 1; i < n; ++i) mx = std::max(mx, v[i]);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        v[i] = std::exp(v[i] - mx);
        sum += v[i];
    }
    for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

Session::Session(const Model& model, ThreadPool& pool, uint32_t context) : model_(model), pool_(pool) {
    const HyperParams& hp = model.hparams();
    context_ = context != 0 ? context : std::min<uint32_t>(hp.max_position ? hp.max_position : 4096, 4096);
    const size_t kv_dim = size_t(hp.n_kv_heads) * hp.head_dim, q_dim = size_t(hp.n_heads) * hp.head_dim;
    k_cache_.resize(size_t(hp.n_layers) * context_ * kv_dim);
    v_cache_.resize(k_cache_.size());
    x_.resize(hp.hidden_size);
    h_.resize(hp.hidden_size);
    q_.resize(q_dim);
    k_.resize(kv_dim);
    v_.resize(kv_dim);
    att_.resize(q_dim);
    proj_.resize(hp.hidden_size);
    scores_.resize(size_t(hp.n_heads) * context_);
    const size_t ffn = std::max({hp.expert_ffn, hp.shared_expert_ffn, hp.dense_ffn, 1u});
    gate_.resize(ffn);
    up_.resize(ffn);
    ffn_out_.resize(hp.hidden_size);
    moe_out_.resize(hp.hidden_size);
    router_logits_.resize(std::max(hp.n_experts, 1u));
    router_probs_.resize(router_logits_.size());
    selected_.resize(std::max(hp.n_experts_active, 1u));
    selected_w_.resize(selected_.size());
    logits_.resize(hp.vocab_size);
}

void Session::matvec(const TensorView& w, const float* x, float* y) {
    const size_t cols = w.cols;
    // Rows per task: enough work to pay for the hand-off.
    const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(cols, 1));
    pool_.parallel_for(w.rows, min_rows, [&](size_t begin, size_t end) {
        kernels::matvec_rows(w.type, w.data, cols, x, y + begin, begin, end);
    });
}

Result<std::span<const float>> Session::eval(std::span<const int32_t> tokens) {
    if (tokens.empty()) return error("no tokens to evaluate");
    Result<std::span<const float>> last = std::span<const float>(logits_);
    for (int32_t t : tokens) {
        last = eval(t);
        if (!last) return last;
    }
    return last;
}

Result<std::span<const float>> Session::eval(int32_t token) {
    const HyperParams& hp = model_.hparams();
    if (token < 0 || static_cast<uint32_t>(token) >= hp.vocab_size)
        return error("token id " + std::to_string(token) + " out of range (vocabulary " + std::to_string(hp.vocab_size) + ")");
    if (position_ >= context_) return error("context full (" + std::to_string(context_) + " tokens)");
    std::shared_lock weights(model_.swap_lock());  // an expert hot-swap waits for this token

    const TensorView& embed = model_.embedding();
    kernels::dequantize_row(embed.type, embed.data, hp.hidden_size, static_cast<size_t>(token), x_.data());

    const auto& layers = model_.layers();
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        const LayerWeights& w = layers[l];
        CounterSource* counters = observer_ ? observer_->counters() : nullptr;  // [counters]
        if (counters) counters->start(0);
        const uint64_t t0 = observer_ ? now_ns() : 0;
        rmsnorm(x_.data(), f32(w.attn_norm), hp.rms_eps, hp.hidden_size, h_.data());
        attention(l, w);
        for (uint32_t i = 0; i < hp.hidden_size; ++i) x_[i] += proj_[i];
        const uint64_t t1 = observer_ ? now_ns() : 0;

        rmsnorm(x_.data(), f32(w.ffn_norm), hp.rms_eps, hp.hidden_size, h_.data());
        router_ns_ = 0;
        if (w.is_moe) {
            if (Status s = moe(l, w); !s) return s;
        } else {
            ffn(w.dense, hp.dense_ffn, moe_out_.data());
        }
        for (uint32_t i = 0; i < hp.hidden_size; ++i) x_[i] += moe_out_[i];
        if (observer_) {
            const uint64_t t2 = now_ns();
            observer_->on_layer_timing(LayerTiming{l, position_, t1 - t0, router_ns_, t2 - t1 - router_ns_});
            if (counters) observer_->on_counters(CounterRecord{l, position_, -1, counters->stop(0)});  // [counters]
        }
    }
    rmsnorm(x_.data(), f32(&model_.output_norm()), hp.rms_eps, hp.hidden_size, h_.data());
    matvec(model_.lm_head(), h_.data(), logits_.data());
    ++position_;
    return std::span<const float>(logits_);
}

void Session::attention(uint32_t layer, const LayerWeights& w) {
    const HyperParams& hp = model_.hparams();
    const uint32_t hd = hp.head_dim, n_heads = hp.n_heads, n_kv = hp.n_kv_heads;
    const size_t q_dim = size_t(n_heads) * hd, kv_dim = size_t(n_kv) * hd;
    matvec(*w.q, h_.data(), q_.data());
    matvec(*w.k, h_.data(), k_.data());
    matvec(*w.v, h_.data(), v_.data());
    if (w.q_bias) {
        for (size_t i = 0; i < q_dim; ++i) q_[i] += f32(w.q_bias)[i];
        for (size_t i = 0; i < kv_dim; ++i) k_[i] += f32(w.k_bias)[i];
        for (size_t i = 0; i < kv_dim; ++i) v_[i] += f32(w.v_bias)[i];
    }
    if (w.q_norm) {  // olmoe normalises the whole projection, before RoPE
        rmsnorm(q_.data(), f32(w.q_norm), hp.rms_eps, q_dim, q_.data());
        rmsnorm(k_.data(), f32(w.k_norm), hp.rms_eps, kv_dim, k_.data());
    }
    if (hp.clip_qkv > 0.0f) {
        const float c = hp.clip_qkv;
        for (float& v : q_) v = std::clamp(v, -c, c);
        for (float& v : k_) v = std::clamp(v, -c, c);
        for (float& v : v_) v = std::clamp(v, -c, c);
    }
    const float* inv_freq = model_.rope_inv_freq().data();
    for (uint32_t h = 0; h < n_heads; ++h) rope(q_.data() + size_t(h) * hd, inv_freq, hd, position_);
    for (uint32_t h = 0; h < n_kv; ++h) rope(k_.data() + size_t(h) * hd, inv_freq, hd, position_);

    float* kc = k_cache_.data() + size_t(layer) * context_ * kv_dim;
    float* vc = v_cache_.data() + size_t(layer) * context_ * kv_dim;
    std::copy(k_.begin(), k_.end(), kc + size_t(position_) * kv_dim);
    std::copy(v_.begin(), v_.end(), vc + size_t(position_) * kv_dim);

    const uint32_t n_pos = position_ + 1;
    const uint32_t group = n_heads / n_kv;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    pool_.parallel_for(n_heads, 1, [&](size_t hb, size_t he) {
        for (size_t h = hb; h < he; ++h) {
            const float* q = q_.data() + h * hd;
            const size_t kvh = h / group;
            float* sc = scores_.data() + h * context_;
            for (uint32_t p = 0; p < n_pos; ++p) {
                const float* k = kc + size_t(p) * kv_dim + kvh * hd;
                float dot = 0.0f;
                for (uint32_t i = 0; i < hd; ++i) dot += q[i] * k[i];
                sc[p] = dot * scale;
            }
            softmax(sc, n_pos);
            float* out = att_.data() + h * hd;
            std::fill(out, out + hd, 0.0f);
            for (uint32_t p = 0; p < n_pos; ++p) {
                const float* v = vc + size_t(p) * kv_dim + kvh * hd;
                const float a = sc[p];
                for (uint32_t i = 0; i < hd; ++i) out[i] += a * v[i];
            }
        }
    });
    matvec(*w.o, att_.data(), proj_.data());
}

void Session::ffn(const FfnWeights& w, uint32_t ffn_dim, float* out) {
    matvec(*w.gate, h_.data(), gate_.data());
    matvec(*w.up, h_.data(), up_.data());
    for (uint32_t i = 0; i < ffn_dim; ++i) gate_[i] = silu(gate_[i]) * up_[i];
    matvec(*w.down, gate_.data(), out);
}

Status Session::moe(uint32_t layer, const LayerWeights& w) {
    const HyperParams& hp = model_.hparams();
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active, H = hp.hidden_size;
    const uint64_t t0 = observer_ ? now_ns() : 0;
    matvec(*w.router, h_.data(), router_logits_.data());
    std::copy(router_logits_.begin(), router_logits_.begin() + n_exp, router_probs_.begin());
    softmax(router_probs_.data(), n_exp);

    // Top-k by probability; ties go to the lower expert index, as a stable selection.
    for (uint32_t j = 0; j < k; ++j) {
        int32_t best = -1;
        for (uint32_t e = 0; e < n_exp; ++e) {
            bool taken = false;
            for (uint32_t s = 0; s < j; ++s) taken |= selected_[s] == static_cast<int32_t>(e);
            if (!taken && (best < 0 || router_probs_[e] > router_probs_[best])) best = static_cast<int32_t>(e);
        }
        selected_[j] = best;
        selected_w_[j] = router_probs_[best];
    }
    // Mixtral always renormalises the top-k; qwen2_moe and olmoe only with norm_topk_prob.
    if (model_.family() == Family::Mixtral || (hp.flags & kNormTopkProb)) {
        float sum = 0.0f;
        for (uint32_t j = 0; j < k; ++j) sum += selected_w_[j];
        for (uint32_t j = 0; j < k; ++j) selected_w_[j] /= sum;
    }
    if (observer_) {
        router_ns_ = now_ns() - t0;
        observer_->on_routing(RoutingRecord{layer, position_, std::span<const int32_t>(selected_.data(), k),
                                            std::span<const float>(selected_w_.data(), k),
                                            std::span<const float>(router_logits_.data(), n_exp),
                                            std::span<const float>(router_probs_.data(), n_exp)});
    }

    // Sum expert outputs in ascending expert order (as transformers' index_add_ loop does).
    std::fill(moe_out_.begin(), moe_out_.end(), 0.0f);
    CounterSource* counters = observer_ ? observer_->counters() : nullptr;  // [counters]
    for (uint32_t e = 0; e < n_exp; ++e) {
        for (uint32_t j = 0; j < k; ++j) {
            if (selected_[j] != static_cast<int32_t>(e)) continue;
            if (counters) counters->start(1);  // [counters]
            ffn(w.experts[e], hp.expert_ffn, ffn_out_.data());
            if (counters) observer_->on_counters(CounterRecord{layer, position_, static_cast<int32_t>(e), counters->stop(1)});
            for (uint32_t i = 0; i < H; ++i) moe_out_[i] += selected_w_[j] * ffn_out_[i];
        }
    }
    if (w.shared_expert.gate) {
        float g = 0.0f;
        matvec(*w.shared_expert_gate, h_.data(), &g);
        ffn(w.shared_expert, hp.shared_expert_ffn, ffn_out_.data());
        const float s = sigmoid(g);
        for (uint32_t i = 0; i < H; ++i) moe_out_[i] += s * ffn_out_[i];
    }
    return Status::ok();
}

}  // namespace colibri
