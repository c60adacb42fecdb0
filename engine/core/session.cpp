#include "engine/core/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>

#include "engine/core/elementwise.h"
#include "kernels/matvec.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/rope.h"

#ifndef COLIBRI_HUGEPAGE_DEFAULT
#define COLIBRI_HUGEPAGE_DEFAULT 0
#endif

namespace colibri {

using namespace format;

namespace {

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

const float* f32(const TensorView* t) { return static_cast<const float*>(t->data); }

// The rotation of position `position`: cos and sin of position · inv_freq[i] for the rotary_dim / 2 pairs, times
// the RoPE attention factor (YaRN; 1 otherwise). Worked out once per token for all layers and heads (a decode
// step used to call sin and cos 5000 times, ~1 % of it).
void rope_angles(const RopeTable& rope, uint32_t position, float* cos_out, float* sin_out) {
    const size_t half = rope.inv_freq.size();
    for (size_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(position) * rope.inv_freq[i];
        cos_out[i] = std::cos(angle);
        sin_out[i] = std::sin(angle);
    }
    if (rope.attention_factor != 1.0f)
        for (size_t i = 0; i < half; ++i) cos_out[i] *= rope.attention_factor, sin_out[i] *= rope.attention_factor;
}

void rope(RopeStyle style, float* v, const float* c, const float* s, uint32_t half) {
    if (style == RopeStyle::Pairs) rope_pairs(v, c, s, half);
    else rope_halves(v, c, s, half);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Hints the cache to fetch [p, p + bytes) (at most 256 KB: a prefetch too large would only evict itself) into
// L2; returns at once.
void prefetch_for_read(const void* p, size_t bytes) {
    const auto* c = static_cast<const char*>(p);
    for (size_t o = 0; o < std::min<size_t>(bytes, 256 << 10); o += 64) __builtin_prefetch(c + o, 0, 2);
}

bool env_flag(const char* name, bool fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    return std::strcmp(v, "0") != 0;
}

void add_bias(float* v, const TensorView* bias, size_t a, size_t b) {
    if (bias == nullptr) return;
    for (size_t i = a; i < b; ++i) v[i] += f32(bias)[i];
}

}  // namespace

SessionOptions SessionOptions::from_environment() {
    SessionOptions o;
    o.prefetch_experts = env_flag("COLIBRI_PREFETCH", o.prefetch_experts);
    o.huge_pages = env_flag("COLIBRI_HUGEPAGE", COLIBRI_HUGEPAGE_DEFAULT != 0);
    return o;
}

Session::Session(const Model& model, ThreadPool& pool, uint32_t context, SessionOptions options)
    : model_(model), pool_(pool), options_(options) {
    const HyperParams& hp = model.hparams();
    const ModelRules& rules = model.rules();
    const AttentionRules& ar = rules.attention;
    context_ = context != 0 ? context : std::min<uint32_t>(hp.max_position ? hp.max_position : 4096, 4096);
    capacity_ = std::clamp<uint32_t>(options_.chunk, 1, SessionOptions::kMaxChunk);
    options_.chunk = capacity_;
    const ActivationAllocator<float> alloc(options_.huge_pages);
    auto sized = [&](ActivationBuffer<float>& b, size_t n) {
        b = ActivationBuffer<float>(alloc);
        b.resize(n);
    };
    const size_t C = capacity_, H = hp.hidden_size;
    const size_t kv_dim = size_t(hp.n_kv_heads) * hp.head_dim, q_dim = size_t(hp.n_heads) * hp.head_dim;
    const size_t context_slots = (size_t(context_) + kKeyBlock - 1) / kKeyBlock * kKeyBlock;

    // The caches' geometry per layer. A sliding layer's ring holds its window and one chunk more: a chunk writes
    // all its keys before it attends, and must not overwrite a position an earlier token of it still needs.
    caches_.resize(hp.n_layers);
    size_t k_total = 0, v_total = 0;
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        LayerCache& c = caches_[l];
        if (ar.mla) {
            c.heads = 1;
            c.key_dim = ar.kv_lora_rank + ar.rotary_dim;
            c.value_dim = ar.kv_lora_rank;
        } else {
            c.heads = hp.n_kv_heads;
            c.key_dim = c.value_dim = hp.head_dim;
        }
        c.held = static_cast<uint32_t>(context_slots);
        if (model.layers()[l].sliding && ar.sliding_window > 0) {
            c.window = ar.sliding_window;
            const size_t ring = (size_t(ar.sliding_window) + C - 1 + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
            c.held = static_cast<uint32_t>(std::min(ring, context_slots));
        }
        c.k_offset = k_total;
        c.v_offset = v_total;
        k_total += size_t(c.heads) * c.held * c.key_dim;
        v_total += size_t(c.heads) * c.held * c.value_dim;
        max_slots_ = std::max(max_slots_, c.held);
    }
    // Zero pages on demand: a session's start and resident memory grow with the positions it reaches, not
    // with the context it may reach.
    k_cache_ = ZeroPageBuffer<float>(std::max<size_t>(k_total, 1), options_.huge_pages);
    v_cache_ = ZeroPageBuffer<float>(std::max<size_t>(v_total, 1), options_.huge_pages);

    const size_t att_dim = ar.mla ? size_t(hp.n_heads) * ar.v_head_dim : q_dim;
    const size_t k_dim = ar.mla ? size_t(ar.kv_lora_rank) + ar.rotary_dim : kv_dim;
    sized(x_, C * H);
    sized(h_, C * H);
    sized(q_, C * q_dim);
    sized(q_low_, C * std::max<size_t>(ar.q_lora_rank, 1));
    sized(k_, C * k_dim);
    sized(v_, C * kv_dim);
    sized(att_, C * att_dim);
    sized(proj_, C * H);
    const size_t group = ar.mla ? 1 : hp.n_heads / std::max(hp.n_kv_heads, 1u);
    sized(scores_, size_t(pool.size()) * group * max_slots_);
    size_t max_window = 0;
    for (const LayerCache& c : caches_) max_window = std::max<size_t>(max_window, c.window ? c.held : 0);
    sized(values_, size_t(pool.size()) * max_window * hp.head_dim);
    if (ar.mla) {
        sized(latent_q_, C * hp.n_heads * k_dim);
        sized(latent_out_, C * hp.n_heads * ar.kv_lora_rank);
    }
    const size_t ffn = std::max({hp.expert_ffn, hp.shared_expert_ffn, hp.dense_ffn, 1u});
    const size_t n_exp = std::max(hp.n_experts, 1u), k = std::max(hp.n_experts_active, 1u);
    // Routed experts: one row per (token, selected expert); a dense or shared FFN run alone uses the start.
    sized(gate_, C * std::max(k * hp.expert_ffn, ffn));
    sized(up_, gate_.size());
    sized(expert_in_, C * k * H);
    sized(ffn_out_, C * k * H);
    sized(moe_out_, C * H);
    sized(shared_gate_up_, 2 * C * hp.shared_expert_ffn);
    sized(shared_out_, C * H);
    sized(router_logits_, C * n_exp);
    sized(router_probs_, C * n_exp);
    sized(shared_gate_, C);
    sized(rope_cos_, C * std::max<size_t>(model.rope().inv_freq.size(), 1));
    sized(rope_sin_, rope_cos_.size());
    sized(selection_, C * k);
    groups_.resize(C * std::max(rules.routing.topk_group, 1u));
    selected_.resize(C * k);
    selected_w_.resize(C * k);
    expert_rows_.resize(n_exp * C);
    expert_count_.resize(n_exp);
    expert_block_.resize(n_exp);
    jobs_.reserve(n_exp + 1);
    gated_jobs_.reserve(n_exp + 1);
    predicted_.assign(size_t(hp.n_layers) * k, -1);
    logits_.resize(hp.vocab_size);
    rows_.resize(C);
    parts_.reserve(C);
    // With an expert cache nothing reads experts through the mapping, so there is nothing to advise.
    if (options_.prefetch_experts && model.expert_cache() == nullptr) prefetcher_ = std::make_unique<ExpertPrefetcher>(model);
    if (model.expert_cache() != nullptr) chosen_.reserve(n_exp);
    {  // next-layer prediction (options_.predict_experts, or a prefetching expert cache): small, always sized
        sized(predict_in_, C * H);
        predict_selected_.resize(C * k);
        predict_w_.resize(C * k);
        predict_mark_.assign(n_exp, 0);
        predicted_next_.reserve(n_exp);
    }
}

Status Session::populate_kv(uint32_t end) {
    if (end <= kv_resident_) return Status::ok();
    const uint32_t target = std::min(context_, std::max({end, 2 * kv_resident_, kKvMinStep}));
    for (const LayerCache& c : caches_) {
        // Whole key blocks: attention reads the last block's columns past the newest position (never using them),
        // which must not take read faults either. A ring is made resident whole the first time.
        const uint32_t from = std::min(kv_resident_, c.held), to = std::min(target, c.held);
        if (to <= from) continue;
        const size_t b0 = from / kKeyBlock, b1 = (to + kKeyBlock - 1) / kKeyBlock;
        const size_t key_block = size_t(c.key_dim) * kKeyBlock;
        for (uint32_t h = 0; h < c.heads; ++h) {
            const size_t kb = c.k_offset + size_t(h) * c.held * c.key_dim;
            const size_t vb = c.v_offset + size_t(h) * c.held * c.value_dim;
            if (!k_cache_.populate(kb + b0 * key_block, (b1 - b0) * key_block) ||
                !v_cache_.populate(vb + size_t(from) * c.value_dim, size_t(to - from) * c.value_dim))
                return error("out of memory for the KV cache at position " + std::to_string(end));
        }
    }
    kv_resident_ = target;
    return Status::ok();
}

void Session::matmul(const TensorView& w, const float* x, uint32_t n, float* y) {
    const MatmulJob job{&w, x, n, y};
    run_matmuls(pool_, std::span<const MatmulJob>(&job, 1));
}

Status Session::check_input(std::span<const int32_t> tokens) const {
    const uint32_t vocab = model_.hparams().vocab_size;
    for (int32_t t : tokens)
        if (t < 0 || static_cast<uint32_t>(t) >= vocab)
            return error("token id " + std::to_string(t) + " out of range (vocabulary " + std::to_string(vocab) + ")");
    if (tokens.size() > context_ - position_) {
        auto count = [](uint64_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
        if (position_ == context_) return error("context full: all " + count(context_, "position") + " are used");
        return error("context full: " + count(tokens.size(), "token") + " do not fit in the " + count(context_ - position_, "position") +
                     " left of " + std::to_string(context_));
    }
    return Status::ok();
}

Result<std::span<const float>> Session::eval(int32_t token) { return eval(std::span<const int32_t>(&token, 1)); }

Result<std::span<const float>> Session::eval(std::span<const int32_t> tokens) {
    if (tokens.empty()) return error("no tokens to evaluate");
    if (Status s = check_input(tokens); !s) return s;
    // Counters are sampled per token: with a counting observer, chunks are single tokens.
    const size_t chunk = observer_ && observer_->counters() ? 1 : capacity_;
    for (size_t i = 0; i < tokens.size(); i += chunk) {
        const uint32_t n = static_cast<uint32_t>(std::min(chunk, tokens.size() - i));
        if (Status s = eval_chunk(tokens.data() + i, n, i + n == tokens.size()); !s) return s;
    }
    return std::span<const float>(logits_);
}

Status Session::eval_chunk(const int32_t* tokens, uint32_t n, bool with_logits) {
    const uint64_t chunk_t0 = observer_ ? now_ns() : 0;
    std::shared_lock weights(model_.swap_lock());  // an expert hot-swap waits for this chunk
    if (Status s = populate_kv(position_ + n); !s) return s;
    embed(tokens, n, 0);
    for (uint32_t i = 0; i < n; ++i) rows_[i] = {observer_, position_ + i};
    observed_ = observer_ != nullptr;
    const Part self{this, 0, n};
    if (Status s = layers(std::span<const Part>(&self, 1), n); !s) return s;
    const uint32_t first = position_;
    position_ += n;
    const uint64_t head_t0 = observer_ ? now_ns() : 0;
    if (with_logits) logits_of(n - 1, *this);
    if (observer_) report_token_timing(*observer_, first, n, (head_t0 - chunk_t0) / n, with_logits ? now_ns() - head_t0 : 0);
    return Status::ok();
}

void Session::report_token_timing(TraceObserver& observer, uint32_t first, uint32_t count, uint64_t body_ns, uint64_t head_ns) {
    for (uint32_t i = 0; i < count; ++i) {
        const bool last = i + 1 == count;
        observer.on_token_timing(TokenTiming{first + i, last ? head_ns : 0, body_ns + (last ? head_ns : 0)});
    }
}

void Session::embed(const int32_t* tokens, uint32_t n, uint32_t row) {
    const size_t H = model_.hparams().hidden_size;
    const TensorView& embed = model_.embedding();
    for (uint32_t i = 0; i < n; ++i)
        kernels::dequantize_row(embed.type, embed.data, H, static_cast<size_t>(tokens[i]), x_.data() + (row + i) * H);
}

void Session::rope_rows(uint32_t n) {
    const size_t half = model_.rope().inv_freq.size();
    for (uint32_t i = 0; i < n; ++i) rope_angles(model_.rope(), position_ + i, rope_cos_.data() + i * half, rope_sin_.data() + i * half);
}

void Session::logits_of(uint32_t row, Session& owner) {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    rmsnorm(x_.data() + size_t(row) * H, f32(&model_.output_norm()), hp.rms_eps, H, h_.data());
    matmul(model_.lm_head(), h_.data(), 1, owner.logits_.data());
}

Status Session::layers(std::span<const Part> parts, uint32_t n) {
    // This session's buffers hold the n rows; each part's attention runs in its own session (its cache, its
    // positions, its rotations), on a copy of its rows when that session is not this one.
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    for (const Part& p : parts) p.session->rope_rows(p.count);
    if (predicting()) predict_first_moe_layer(n);
    const auto& layers = model_.layers();
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        const LayerWeights& w = layers[l];
        CounterSource* counters = observer_ ? observer_->counters() : nullptr;  // [counters]; then n == 1
        if (counters) counters->start(0);
        const uint64_t t0 = observed_ ? now_ns() : 0;
        for (uint32_t i = 0; i < n; ++i) rmsnorm(x_.data() + i * H, f32(w.attn_norm), hp.rms_eps, H, h_.data() + i * H);
        for (const Part& p : parts) {
            Session& s = *p.session;
            if (&s != this) std::copy_n(h_.data() + size_t(p.row) * H, size_t(p.count) * H, s.h_.data());
            if (model_.rules().attention.mla) s.latent_attention(l, w, p.count);
            else s.attention(l, w, p.count);
            if (&s != this) std::copy_n(s.proj_.data(), size_t(p.count) * H, proj_.data() + size_t(p.row) * H);
        }
        for (size_t i = 0; i < n * H; ++i) x_[i] += proj_[i];
        const uint64_t t1 = observed_ ? now_ns() : 0;

        for (uint32_t i = 0; i < n; ++i) rmsnorm(x_.data() + i * H, f32(w.ffn_norm), hp.rms_eps, H, h_.data() + i * H);
        router_ns_ = 0;
        if (w.is_moe) {
            if (Status s = moe(l, w, n); !s) return s;
        } else {
            ffn(w.dense, h_.data(), n, moe_out_.data());
        }
        for (size_t i = 0; i < n * H; ++i) x_[i] += moe_out_[i];
        if (observed_) {
            const uint64_t t2 = now_ns();
            for (uint32_t i = 0; i < n; ++i)
                if (rows_[i].observer)
                    rows_[i].observer->on_layer_timing(
                        LayerTiming{l, rows_[i].position, (t1 - t0) / n, router_ns_ / n, (t2 - t1 - router_ns_) / n});
            if (counters) observer_->on_counters(CounterRecord{l, position_, -1, counters->stop(0)});  // [counters]
        }
    }
    return Status::ok();
}

Status Session::eval_batch(std::span<const BatchPart> parts) {
    if (parts.empty()) return error("no sequences to evaluate");
    Session& lead = *parts.front().session;
    size_t total = 0;
    bool counting = false;
    for (size_t i = 0; i < parts.size(); ++i) {
        const BatchPart& p = parts[i];
        if (p.session == nullptr || p.tokens.empty()) return error("a batch part without a session or tokens");
        if (&p.session->model_ != &lead.model_ || &p.session->pool_ != &lead.pool_)
            return error("the sessions of a batch must share one model and thread pool");
        for (size_t j = 0; j < i; ++j)
            if (parts[j].session == p.session) return error("a session appears twice in one batch");
        if (Status s = p.session->check_input(p.tokens); !s) return s;
        total += p.tokens.size();
        counting = counting || (p.session->observer_ && p.session->observer_->counters());
    }
    // Counters are sampled per token (see eval): such a batch is evaluated sequence by sequence.
    if (counting) {
        for (const BatchPart& p : parts)
            if (auto r = p.session->eval(p.tokens); !r) return r.status();
        return Status::ok();
    }
    if (total > lead.capacity_)
        return error("a batch of " + std::to_string(total) + " tokens exceeds the chunk capacity of " + std::to_string(lead.capacity_));

    std::shared_lock weights(lead.model_.swap_lock());  // an expert hot-swap waits for this step
    for (const BatchPart& p : parts)
        if (Status s = p.session->populate_kv(p.session->position_ + static_cast<uint32_t>(p.tokens.size())); !s) return s;
    const uint64_t step_t0 = now_ns();
    // Parts' rows in order: the lead's first, at row 0, so that its attention works in place.
    std::vector<Part>& rows = lead.parts_;
    rows.clear();
    uint32_t row = 0;
    lead.observed_ = false;
    for (const BatchPart& p : parts) {
        Session& s = *p.session;
        const auto m = static_cast<uint32_t>(p.tokens.size());
        lead.embed(p.tokens.data(), m, row);
        for (uint32_t i = 0; i < m; ++i) lead.rows_[row + i] = {s.observer_, s.position_ + i};
        lead.observed_ = lead.observed_ || s.observer_ != nullptr;
        rows.push_back({&s, row, m});
        row += m;
    }
    if (Status s = lead.layers(rows, row); !s) return s;
    // The body's time is split evenly among the step's rows; each part's logits are its own head.
    const uint64_t body = (now_ns() - step_t0) / row;
    for (const Part& p : rows) {
        Session& s = *p.session;
        const uint32_t first = s.position_;
        s.position_ += p.count;
        const uint64_t head_t0 = s.observer_ ? now_ns() : 0;
        lead.logits_of(p.row + p.count - 1, s);
        if (s.observer_) report_token_timing(*s.observer_, first, p.count, body, now_ns() - head_t0);
    }
    return Status::ok();
}

void Session::attention_scores(const float* kc, uint32_t key_dim, uint32_t ring, uint32_t lo, uint32_t n_pos, const float* q,
                               uint32_t heads, const float* sinks, float scale, float* sc, size_t ls) const {
    // Position p's key is column p % kKeyBlock of block p / kKeyBlock (of slot p % ring in a ring). Score rows
    // start at position lo. Each score is one fma chain over the key's dims (weighted_rows), so how the
    // positions are cut into calls does not change a bit.
    const size_t key_block = size_t(key_dim) * kKeyBlock;
    for (uint32_t p = lo; p < n_pos;) {
        const uint32_t slot = p % ring, col = slot % kKeyBlock;
        const uint32_t count = std::min(n_pos - p, kKeyBlock - col);
        kernels::weighted_rows(kc + size_t(slot / kKeyBlock) * key_block + col, kKeyBlock, key_dim, count, q, key_dim, heads,
                               sc + (p - lo), ls);
        p += count;
    }
    for (uint32_t j = 0; j < heads; ++j) {
        if (sinks) attention_softmax_sink(sc + size_t(j) * ls, n_pos - lo, scale, sinks[j]);
        else attention_softmax(sc + size_t(j) * ls, n_pos - lo, scale);
    }
}

void Session::attention(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const AttentionRules& rules = model_.rules().attention;
    const LayerCache& cache = caches_[layer];
    const uint32_t hd = hp.head_dim, n_heads = hp.n_heads, n_kv = hp.n_kv_heads;
    const uint32_t group = n_heads / n_kv;
    const uint32_t rot_half = rules.rotary_dim / 2, slots = cache.held;
    const size_t q_dim = size_t(n_heads) * hd, kv_dim = size_t(n_kv) * hd;
    const size_t key_block = size_t(hd) * kKeyBlock;  // floats per (KV head, block of positions)
    float* kc = k_cache_.data() + cache.k_offset;
    float* vc = v_cache_.data() + cache.v_offset;

    // The projections' rows of KV heads [kv0, kv1) and of their query heads, made ready for attention: bias,
    // q/k norm, clip and RoPE, then the keys and values stored in the cache. (olmoe's q/k norm needs whole
    // projections.)
    auto prepare = [&](uint32_t kv0, uint32_t kv1) {
        const size_t qa = size_t(kv0) * group * hd, qb = size_t(kv1) * group * hd;  // rows of q
        const size_t ka = size_t(kv0) * hd, kb = size_t(kv1) * hd;                  // rows of k and v
        for (uint32_t t = 0; t < n; ++t) {
            float* q = q_.data() + t * q_dim;
            float* k = k_.data() + t * kv_dim;
            float* v = v_.data() + t * kv_dim;
            add_bias(q, w.q_bias, qa, qb);
            add_bias(k, w.k_bias, ka, kb);
            add_bias(v, w.v_bias, ka, kb);
            if (rules.qk_norm == QkNorm::WholeProjection) {  // before RoPE (only with kv0 = 0, kv1 = n_kv)
                rmsnorm(q, f32(w.q_norm), hp.rms_eps, q_dim, q);
                rmsnorm(k, f32(w.k_norm), hp.rms_eps, kv_dim, k);
            } else if (rules.qk_norm == QkNorm::PerHead) {  // qwen3_moe, glm4_moe: each head over head_dim
                for (uint32_t h = kv0 * group; h < kv1 * group; ++h) rmsnorm(q + size_t(h) * hd, f32(w.q_norm), hp.rms_eps, hd, q + size_t(h) * hd);
                for (uint32_t h = kv0; h < kv1; ++h) rmsnorm(k + size_t(h) * hd, f32(w.k_norm), hp.rms_eps, hd, k + size_t(h) * hd);
            }
            if (rules.clip_qkv > 0.0f) {
                const float c = rules.clip_qkv;
                for (size_t i = qa; i < qb; ++i) q[i] = std::clamp(q[i], -c, c);
                for (size_t i = ka; i < kb; ++i) k[i] = std::clamp(k[i], -c, c);
                for (size_t i = ka; i < kb; ++i) v[i] = std::clamp(v[i], -c, c);
            }
            // RoPE on each head's first rotary_dim dims (all of them but for partial rotary).
            const float* rc = rope_cos_.data() + size_t(t) * rot_half;
            const float* rs = rope_sin_.data() + size_t(t) * rot_half;
            for (uint32_t h = kv0 * group; h < kv1 * group; ++h) rope(rules.rope_style, q + size_t(h) * hd, rc, rs, rot_half);
            for (uint32_t h = kv0; h < kv1; ++h) rope(rules.rope_style, k + size_t(h) * hd, rc, rs, rot_half);
            // Keys transposed in blocks of kKeyBlock positions ([kv head][block][dim][position in block]), values
            // as rows ([kv head][position][dim]): both products of a head are then weighted_rows (below), and a
            // block's keys are one contiguous 16 KB (head_dim 64) that the scores read as a whole.
            const size_t slot = (position_ + t) % slots;
            for (uint32_t h = kv0; h < kv1; ++h) {
                float* block = kc + (size_t(h) * slots / kKeyBlock + slot / kKeyBlock) * key_block + slot % kKeyBlock;
                for (uint32_t i = 0; i < hd; ++i) block[size_t(i) * kKeyBlock] = k[size_t(h) * hd + i];
                std::copy_n(v + size_t(h) * hd, hd, vc + (size_t(h) * slots + slot) * hd);
            }
        }
    };

    // Causal attention of token t's query heads that share KV head kvh, over the positions up to the token's
    // own (the last `window` of them in a sliding layer): the keys and values are read once for the group.
    // `part` picks the score rows. Both products are weighted_rows (kernels/canonical.h, 3: one fma chain per
    // element, the same bits for every variant, thread count and chunking):
    //   scores[j][p] = Σ_d q_j[d] · K^T[d][p],   out_j[d] = Σ_p softmax(scores_j · scale)[p] · V[p][d].
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd)) * model_.rope().softmax_scale;
    const size_t ls = max_slots_;  // a score row: whole blocks (see below)
    // Query heads [j0, j1) of the group (all of it unless a group is split among parts, below).
    auto attend = [&](size_t part, size_t t, uint32_t kvh, uint32_t j0, uint32_t j1) {
        const uint32_t heads = j1 - j0;
        float* sc = scores_.data() + part * group * ls;
        const uint32_t n_pos = position_ + static_cast<uint32_t>(t) + 1;
        const size_t first = size_t(kvh) * group + j0;  // the first query head's index
        const float* q = q_.data() + t * q_dim + first * hd;  // the heads' queries, contiguous
        float* out = att_.data() + t * q_dim + first * hd;
        const float* kh = kc + size_t(kvh) * slots * hd;
        const float* vh = vc + size_t(kvh) * slots * hd;
        if (cache.window != 0 || w.sinks != nullptr) {
            const uint32_t lo = cache.window != 0 && n_pos > cache.window ? n_pos - cache.window : 0;
            attention_scores(kh, hd, slots, lo, n_pos, q, heads, w.sinks ? f32(w.sinks) + first : nullptr, scale, sc, ls);
            // The window's values in position order (a ring may wrap): one fma chain per output element.
            const float* rows = vh;
            if (cache.window != 0) {
                float* gathered = values_.data() + part * size_t(cache.held) * hd;
                for (uint32_t p = lo; p < n_pos; ++p) std::copy_n(vh + size_t(p % slots) * hd, hd, gathered + size_t(p - lo) * hd);
                rows = gathered;
            }
            kernels::weighted_rows(rows, hd, n_pos - lo, hd, sc, ls, heads, out, hd);
            return;
        }
        // Per block of positions: rows of kKeyBlock floats side by side instead of rows a context apart (with
        // rows 16 KB apart every dimension's row fell into the same cache sets, and the 64 rows were 64 streams;
        // attention took 17-23 µs per layer at 200 positions).
        // The last block's columns are rounded up to whole vectors of 16: the kernels' ragged tail is a scalar
        // fma chain per element (2 µs per KV head at 8 leftover columns), and the extra scores, from key slots
        // not yet written, are never read (softmax and values stop at n_pos).
        for (uint32_t p0 = 0; p0 < n_pos; p0 += kKeyBlock) {
            const uint32_t cols = std::min<uint32_t>(kKeyBlock, (n_pos - p0 + 15) / 16 * 16);
            kernels::weighted_rows(kh + size_t(p0 / kKeyBlock) * key_block, kKeyBlock, hd, cols, q, hd, heads, sc + p0, ls);
        }
        for (uint32_t j = 0; j < heads; ++j) attention_softmax(sc + size_t(j) * ls, n_pos, scale);
        kernels::weighted_rows(vh, hd, n_pos, hd, sc, ls, heads, out, hd);
    };

    const size_t parts = pool_.size();
    if (parts > 1 && n_kv % parts == 0 && rules.qk_norm != QkNorm::WholeProjection) {
        // One hand-off for projections and attention: each part owns n_kv / parts KV heads, computes their q,
        // k and v rows (equal work for every part), prepares them and attends over them. A row is the same
        // kernel call whoever computes it, so the bits are those of the split below.
        pool_.parallel_for(parts, 1, [&](size_t part_begin, size_t part_end) {
            for (size_t part = part_begin; part < part_end; ++part) {
                const uint32_t kv0 = static_cast<uint32_t>(n_kv * part / parts);
                const uint32_t kv1 = static_cast<uint32_t>(n_kv * (part + 1) / parts);
                product_rows(*w.q, h_.data(), n, q_.data(), size_t(kv0) * group * hd, size_t(kv1) * group * hd);
                product_rows(*w.k, h_.data(), n, k_.data(), size_t(kv0) * hd, size_t(kv1) * hd);
                product_rows(*w.v, h_.data(), n, v_.data(), size_t(kv0) * hd, size_t(kv1) * hd);
                prepare(kv0, kv1);
                for (uint32_t t = 0; t < n; ++t)
                    for (uint32_t kvh = kv0; kvh < kv1; ++kvh) attend(part, t, kvh, 0, group);
            }
        });
    } else {
        const MatmulJob qkv[3] = {{w.q, h_.data(), n, q_.data()}, {w.k, h_.data(), n, k_.data()}, {w.v, h_.data(), n, v_.data()}};
        run_matmuls(pool_, qkv);
        prepare(0, n_kv);
        // The (token, KV head) pairs split into one fixed range per pool part, each with its own score rows,
        // when the work (about 2·hd multiply-adds per query head and position) pays for the hand-off. With
        // fewer pairs than parts (a single token's attention over one KV head, as in multi-query attention, or
        // over fewer KV heads than threads) each pair's query heads split into slices too, which read the same
        // keys and values: a score or output element is the same fma chain whichever slice computes it.
        const size_t pairs = size_t(n) * n_kv;
        const size_t work = size_t(n) * n_heads * (size_t(position_) + (n + 1) / 2) * hd * 2;
        const size_t split = std::clamp<size_t>(work / 65536, 1, parts);
        const size_t slices = std::min<size_t>(group, (split + pairs - 1) / pairs);
        const size_t items = pairs * slices;
        pool_.parallel_for(split, 1, [&](size_t part_begin, size_t part_end) {
            for (size_t part = part_begin; part < part_end; ++part)
                for (size_t item = items * part / split; item < items * (part + 1) / split; ++item) {
                    const size_t pair = item / slices, slice = item % slices;
                    attend(part, pair / n_kv, static_cast<uint32_t>(pair % n_kv), static_cast<uint32_t>(group * slice / slices),
                           static_cast<uint32_t>(group * (slice + 1) / slices));
                }
        });
    }
    // The router's weights come right after this projection, on this thread alone and before anything else
    // of the MoE block: ask for them now, so they arrive in L2 while the projection streams (a cold 32 KB
    // router took about 1 µs of the serial gap before the experts).
    if (w.router) prefetch_for_read(w.router->data, w.router->size);
    matmul(*w.o, att_.data(), n, proj_.data());
    if (w.o_bias)
        for (uint32_t t = 0; t < n; ++t) add_bias(proj_.data() + size_t(t) * hp.hidden_size, w.o_bias, 0, hp.hidden_size);
}

void Session::latent_attention(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const AttentionRules& rules = model_.rules().attention;
    const LayerCache& cache = caches_[layer];
    const uint32_t n_heads = hp.n_heads, qk = hp.head_dim, rot = rules.rotary_dim, nope = qk - rot;
    const uint32_t lora = rules.kv_lora_rank, key_dim = lora + rot, vd = rules.v_head_dim;
    const size_t q_dim = size_t(n_heads) * qk, key_block = size_t(key_dim) * kKeyBlock;
    float* kc = k_cache_.data() + cache.k_offset;
    float* vc = v_cache_.data() + cache.v_offset;
    constexpr float kLowRankEps = 1e-6f;  // q_a_layernorm and kv_a_layernorm use RMSNorm's default eps

    // The query (through its low-rank path when there is one) and the compressed kv of every token.
    if (w.q_a) {
        matmul(*w.q_a, h_.data(), n, q_low_.data());
        const uint32_t r = rules.q_lora_rank;
        for (uint32_t t = 0; t < n; ++t) rmsnorm(q_low_.data() + t * r, f32(w.q_a_norm), kLowRankEps, r, q_low_.data() + t * r);
        const MatmulJob jobs[2] = {{w.q, q_low_.data(), n, q_.data()}, {w.kv_a, h_.data(), n, k_.data()}};
        run_matmuls(pool_, jobs);
    } else {
        const MatmulJob jobs[2] = {{w.q, h_.data(), n, q_.data()}, {w.kv_a, h_.data(), n, k_.data()}};
        run_matmuls(pool_, jobs);
    }
    const uint32_t rot_half = rot / 2;
    for (uint32_t t = 0; t < n; ++t) {
        float* kv = k_.data() + size_t(t) * key_dim;  // [latent (lora), rope key (rot)]
        rmsnorm(kv, f32(w.kv_a_norm), kLowRankEps, lora, kv);
        const float* rc = rope_cos_.data() + size_t(t) * rot_half;
        const float* rs = rope_sin_.data() + size_t(t) * rot_half;
        rope(rules.rope_style, kv + lora, rc, rs, rot_half);
        for (uint32_t h = 0; h < n_heads; ++h) rope(rules.rope_style, q_.data() + t * q_dim + size_t(h) * qk + nope, rc, rs, rot_half);
        const size_t slot = (position_ + t) % cache.held;
        float* block = kc + (slot / kKeyBlock) * key_block + slot % kKeyBlock;
        for (uint32_t i = 0; i < key_dim; ++i) block[size_t(i) * kKeyBlock] = kv[i];
        std::copy_n(kv, lora, vc + slot * lora);
    }

    // Per head (split among the pool's parts): the absorbed query [k_b_h^T q_nope, q_rope], scores against the
    // latents and rope keys, the weighted sum of latents, then v_b_h out of the latent space. Every element is
    // one kernel call's fma chain whichever part computes it.
    const float scale = 1.0f / std::sqrt(static_cast<float>(qk)) * model_.rope().softmax_scale;
    const size_t ls = max_slots_;
    const size_t parts = std::min<size_t>(pool_.size(), n_heads);
    pool_.parallel_for(parts, 1, [&](size_t part_begin, size_t part_end) {
        for (size_t part = part_begin; part < part_end; ++part) {
            const uint32_t h0 = static_cast<uint32_t>(n_heads * part / parts), h1 = static_cast<uint32_t>(n_heads * (part + 1) / parts);
            float* sc = scores_.data() + part * ls;
            for (uint32_t t = 0; t < n; ++t) {
                const uint32_t n_pos = position_ + t + 1;
                const uint32_t lo = cache.window != 0 && n_pos > cache.window ? n_pos - cache.window : 0;
                for (uint32_t h = h0; h < h1; ++h) {
                    const float* qh = q_.data() + t * q_dim + size_t(h) * qk;
                    float* aq = latent_q_.data() + (size_t(t) * n_heads + h) * key_dim;
                    float* lat = latent_out_.data() + (size_t(t) * n_heads + h) * lora;
                    product_rows(*w.k_b, qh, 1, aq - size_t(h) * lora, size_t(h) * lora, size_t(h + 1) * lora);
                    std::copy_n(qh + nope, rot, aq + lora);
                    attention_scores(kc, key_dim, cache.held, lo, n_pos, aq, 1, nullptr, scale, sc, ls);
                    kernels::weighted_rows(vc + size_t(lo) * lora, lora, n_pos - lo, lora, sc, ls, 1, lat, lora);
                    product_rows(*w.v_b, lat, 1, att_.data() + size_t(t) * n_heads * vd, size_t(h) * vd, size_t(h + 1) * vd);
                }
            }
        }
    });
    if (w.router) prefetch_for_read(w.router->data, w.router->size);
    matmul(*w.o, att_.data(), n, proj_.data());
}

void Session::ffn(const FfnWeights& w, const float* x, uint32_t n, float* out) {
    const GatedJob gate_up{w.gate, w.up, x, n, gate_.data(), up_.data()};
    run_gated_matmuls(pool_, std::span<const GatedJob>(&gate_up, 1));
    matmul(*w.down, gate_.data(), n, out);
}

Status Session::moe(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const RoutingRules& routing = model_.rules().routing;
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active;
    const uint32_t n_groups = routing.n_group > 1 ? routing.topk_group : 0;
    const size_t H = hp.hidden_size;
    const uint64_t t0 = observed_ ? now_ns() : 0;
    route_chunk(w, h_.data(), n, selected_.data(), selected_w_.data());
    if (observed_) {
        router_ns_ = now_ns() - t0;
        for (uint32_t t = 0; t < n; ++t)
            if (rows_[t].observer)
                rows_[t].observer->on_routing(RoutingRecord{layer, rows_[t].position, std::span<const int32_t>(selected_.data() + t * k, k),
                                                            std::span<const float>(selected_w_.data() + t * k, k),
                                                            std::span<const float>(router_logits_.data() + t * n_exp, n_exp),
                                                            std::span<const float>(router_probs_.data() + t * n_exp, n_exp),
                                                            std::span<const float>(selection_.data() + t * k, k),
                                                            std::span<const uint32_t>(groups_.data() + t * std::max(n_groups, 1u), n_groups)});
    }

    // Group the chunk's (token, slot) choices by expert, in token order.
    std::fill(expert_count_.begin(), expert_count_.end(), 0u);
    for (uint32_t s = 0; s < n * k; ++s) {
        const auto e = static_cast<uint32_t>(selected_[s]);
        expert_rows_[size_t(e) * capacity_ + expert_count_[e]++] = s;
    }
    if (prefetcher_) {
        // This layer's experts are known now: start reading all of them before the first one is computed.
        // The next layer's are not, so guess the previous token's choices there.
        for (uint32_t e = 0; e < n_exp; ++e) {
            const int32_t id = static_cast<int32_t>(e);
            if (expert_count_[e]) prefetcher_->prefetch(layer, std::span<const int32_t>(&id, 1));
        }
        if (layer + 1 < hp.n_layers) prefetcher_->prefetch(layer + 1, std::span<const int32_t>(predicted_.data() + (layer + 1) * k, k));
        std::copy(selected_.begin() + (n - 1) * k, selected_.begin() + n * k, predicted_.begin() + layer * k);
    }

    // Every selected expert gets a block of rows (one per token that chose it) in expert_in_, gate_, up_ and
    // ffn_out_, in ascending expert order.
    const uint32_t F = hp.expert_ffn;
    ExpertCache* const cache = model_.expert_cache();
    if (predicting()) predict_next_layer(layer, n);
    uint32_t block = 0;
    for (uint32_t e = 0; e < n_exp; ++e) {
        expert_block_[e] = block;
        if (expert_count_[e] == 0) continue;
        // A .bin.zst decompresses the expert on first use; a damaged frame fails the eval.
        if (cache == nullptr)
            if (Status s = model_.ensure_expert(layer, e); !s) return s;
        if (n > 1) {  // gather the inputs of the tokens that chose e
            const uint32_t* rows = expert_rows_.data() + size_t(e) * capacity_;
            for (uint32_t r = 0; r < expert_count_[e]; ++r)
                std::copy_n(h_.data() + (rows[r] / k) * H, H, expert_in_.data() + (block + r) * H);
        }
        block += expert_count_[e];
    }
    auto input_of = [&](uint32_t e) { return n > 1 ? expert_in_.data() + expert_block_[e] * H : h_.data(); };
    const bool shared = w.shared_expert.gate != nullptr, gated = model_.rules().shared_expert_gated;
    const uint32_t SF = hp.shared_expert_ffn;
    const float limit = model_.rules().swiglu_limit;
    auto gated_job = [&](const FfnWeights& f, const float* x, uint32_t rows, float* g, float* u) {
        GatedJob j{f.gate, f.up, x, rows, g, u};
        j.gate_bias = f.gate_bias ? f32(f.gate_bias) : nullptr;
        j.up_bias = f.up_bias ? f32(f.up_bias) : nullptr;
        j.limit = limit;
        return j;
    };
    CounterSource* counters = observer_ && observer_->count_experts() ? observer_->counters() : nullptr;  // [counters]; then n == 1
    if (cache != nullptr) {
        // Routed experts (their down bias added) through the cache; then the shared expert, as with counters.
        if (Status s = cached_experts(layer, n, *cache); !s) return s;
        if (shared) {
            if (gated) matmul(*w.shared_expert_gate, h_.data(), n, shared_gate_.data());
            ffn(w.shared_expert, h_.data(), n, shared_out_.data());
        }
    } else if (counters) {
        // One expert at a time, so each one's counters are its own.
        for (uint32_t e = 0; e < n_exp; ++e) {
            if (expert_count_[e] == 0) continue;
            counters->start(1);
            const GatedJob j = gated_job(w.experts[e], input_of(e), expert_count_[e], gate_.data(), up_.data());
            run_gated_matmuls(pool_, std::span<const GatedJob>(&j, 1));
            matmul(*w.experts[e].down, gate_.data(), expert_count_[e], ffn_out_.data() + expert_block_[e] * H);
            observer_->on_counters(CounterRecord{layer, position_, static_cast<int32_t>(e), counters->stop(1)});
        }
        if (shared) {
            if (gated) matmul(*w.shared_expert_gate, h_.data(), n, shared_gate_.data());
            ffn(w.shared_expert, h_.data(), n, shared_out_.data());
        }
    } else {
        // Two hand-offs for all experts: every gate and up projection with the activation, then every down
        // projection. (qwen2_moe's one-row shared-expert gate is too small to split: it runs here.)
        if (shared && gated) matmul(*w.shared_expert_gate, h_.data(), n, shared_gate_.data());
        gated_jobs_.clear();
        for (uint32_t e = 0; e < n_exp; ++e) {
            if (expert_count_[e] == 0) continue;
            const size_t at = size_t(expert_block_[e]) * F;
            gated_jobs_.push_back(gated_job(w.experts[e], input_of(e), expert_count_[e], gate_.data() + at, up_.data() + at));
        }
        float* sg = shared_gate_up_.data();
        if (shared) gated_jobs_.push_back({w.shared_expert.gate, w.shared_expert.up, h_.data(), n, sg, sg + size_t(n) * SF});
        run_gated_matmuls(pool_, gated_jobs_);
        jobs_.clear();
        for (uint32_t e = 0; e < n_exp; ++e) {
            if (expert_count_[e] == 0) continue;
            jobs_.push_back({w.experts[e].down, gate_.data() + size_t(expert_block_[e]) * F, expert_count_[e],
                             ffn_out_.data() + size_t(expert_block_[e]) * H});
        }
        if (shared) jobs_.push_back({w.shared_expert.down, sg, n, shared_out_.data()});
        run_matmuls(pool_, jobs_);
    }

    // Each token sums its experts' outputs (with their down-projection bias, gpt-oss) in ascending expert order
    // (as transformers' index_add_ loop does), then the shared expert (gated: qwen2_moe; else with weight 1).
    std::fill(moe_out_.begin(), moe_out_.begin() + n * H, 0.0f);
    for (uint32_t e = 0; e < n_exp; ++e) {
        const uint32_t* rows = expert_rows_.data() + size_t(e) * capacity_;
        // (With the cache the bias was added while the expert was resident.)
        const float* down_bias = w.experts[e].down_bias && cache == nullptr ? f32(w.experts[e].down_bias) : nullptr;
        for (uint32_t r = 0; r < expert_count_[e]; ++r) {
            const float weight = selected_w_[rows[r]];
            float* out = moe_out_.data() + (rows[r] / k) * H;
            float* y = ffn_out_.data() + (expert_block_[e] + r) * H;
            if (down_bias)
                for (size_t i = 0; i < H; ++i) y[i] += down_bias[i];
            for (size_t i = 0; i < H; ++i) out[i] += weight * y[i];
        }
    }
    if (shared) {
        for (uint32_t t = 0; t < n; ++t) {
            float* out = moe_out_.data() + t * H;
            const float* y = shared_out_.data() + t * H;
            if (gated) {
                const float s = sigmoid(shared_gate_[t]);
                for (size_t i = 0; i < H; ++i) out[i] += s * y[i];
            } else {
                for (size_t i = 0; i < H; ++i) out[i] += y[i];
            }
        }
    }
    return Status::ok();
}

void Session::route_chunk(const LayerWeights& w, const float* input, uint32_t n, int32_t* selected, float* weights) {
    const HyperParams& hp = model_.hparams();
    const RoutingRules& routing = model_.rules().routing;
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active;
    const uint32_t n_groups = routing.n_group > 1 ? routing.topk_group : 0;
    matmul(*w.router, input, n, router_logits_.data());
    if (w.router_bias)
        for (uint32_t t = 0; t < n; ++t) add_bias(router_logits_.data() + size_t(t) * n_exp, w.router_bias, 0, n_exp);
    const float* selection_bias = w.selection_bias ? f32(w.selection_bias) : nullptr;
    for (uint32_t t = 0; t < n; ++t)
        route_token(options_.router, routing, router_logits_.data() + size_t(t) * n_exp, selection_bias, n_exp, k,
                    RouteOutput{router_probs_.data() + size_t(t) * n_exp, selected + size_t(t) * k, weights + size_t(t) * k,
                                selection_.data() + size_t(t) * k, groups_.data() + size_t(t) * std::max(n_groups, 1u)});
}

void Session::predict_next_layer(uint32_t layer, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const auto& layers = model_.layers();
    predicted_layer_ = -1;
    uint32_t next = layer + 1;
    while (next < hp.n_layers && !layers[next].is_moe) ++next;
    if (next >= hp.n_layers) return;
    predict_layer(next, n);
    // Without a prefetching cache nothing consumes it; the observer still sees it.
    ExpertCache* const cache = model_.expert_cache();
    if (cache != nullptr && cache->prefetching()) predicted_layer_ = static_cast<int32_t>(next);
}

bool Session::predicting() const {
    const ExpertCache* cache = model_.expert_cache();
    return options_.predict_experts || (cache != nullptr && cache->prefetching());
}

void Session::predict_first_moe_layer(uint32_t n) {
    const auto& layers = model_.layers();
    uint32_t first = 0;
    while (first < layers.size() && !layers[first].is_moe) ++first;
    if (first >= layers.size()) return;
    predict_layer(first, n);
    ExpertCache* const cache = model_.expert_cache();
    if (cache != nullptr && cache->prefetching()) {
        // Read while the layers before it and its attention compute.
        std::unique_lock<std::mutex> lock = cache->lock(first);
        cache->prefetch(first, predicted_next_);
    }
}

void Session::predict_layer(uint32_t target, uint32_t n) {
    const HyperParams& hp = model_.hparams();
    const LayerWeights& w = model_.layers()[target];
    const size_t H = hp.hidden_size;
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active;
    // The residual stream as it is now (before the current layer's MoE, or the embeddings for the first MoE
    // layer), under the target layer's norm: what its router will see, less what comes in between. route_chunk's scratch (logits, scores, selection
    // values, groups) is free once this layer's routing was reported.
    for (uint32_t t = 0; t < n; ++t) rmsnorm(x_.data() + t * H, f32(w.ffn_norm), hp.rms_eps, H, predict_in_.data() + t * H);
    route_chunk(w, predict_in_.data(), n, predict_selected_.data(), predict_w_.data());
    std::fill(predict_mark_.begin(), predict_mark_.end(), uint8_t(0));
    for (uint32_t s = 0; s < n * k; ++s) predict_mark_[static_cast<uint32_t>(predict_selected_[s])] = 1;
    predicted_next_.clear();
    for (uint32_t e = 0; e < n_exp; ++e)
        if (predict_mark_[e]) predicted_next_.push_back(e);
    if (observed_)
        for (uint32_t t = 0; t < n; ++t)
            if (rows_[t].observer)
                rows_[t].observer->on_prediction(PredictionRecord{target, rows_[t].position, std::span<const int32_t>(predict_selected_.data() + size_t(t) * k, k)});
}

Status Session::cached_experts(uint32_t layer, uint32_t n, ExpertCache& cache) {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    const uint32_t F = hp.expert_ffn;
    const float limit = model_.rules().swiglu_limit;
    chosen_.clear();
    for (uint32_t e = 0; e < hp.n_experts; ++e)
        if (expert_count_[e]) chosen_.push_back(e);
    auto input_of = [&](uint32_t e) { return n > 1 ? expert_in_.data() + expert_block_[e] * H : h_.data(); };

    std::unique_lock<std::mutex> lock = cache.lock(layer);
    const ExpertCacheStats before = cache.layer_stats(layer);
    cache.advance(layer, n);
    cache.score_prediction(layer, chosen_);
    // Ascending expert order, as many at a time as the layer's slots hold; each group is computed before the
    // next one may evict it. Every output row is the same computation on the same bytes as without a cache.
    // Within a group the resident experts compute while its misses are read, then the misses: each expert writes
    // only its own rows, so the order changes no bit.
    auto compute = [&](std::span<const uint32_t> experts, bool misses) {
        gated_jobs_.clear();
        jobs_.clear();
        for (uint32_t e : experts) {
            if (cache.missed(layer, e) != misses) continue;
            const FfnWeights& f = cache.weights(layer, e);
            const size_t at = size_t(expert_block_[e]) * F;
            GatedJob j{f.gate, f.up, input_of(e), expert_count_[e], gate_.data() + at, up_.data() + at};
            j.gate_bias = f.gate_bias ? f32(f.gate_bias) : nullptr;
            j.up_bias = f.up_bias ? f32(f.up_bias) : nullptr;
            j.limit = limit;
            gated_jobs_.push_back(j);
            jobs_.push_back({f.down, gate_.data() + at, expert_count_[e], ffn_out_.data() + size_t(expert_block_[e]) * H});
        }
        if (gated_jobs_.empty()) return;
        run_gated_matmuls(pool_, gated_jobs_);
        run_matmuls(pool_, jobs_);
    };
    for (size_t done = 0; done < chosen_.size();) {
        auto group = cache.begin_acquire(layer, std::span<const uint32_t>(chosen_).subspan(done));
        if (!group) return group.status();
        const std::span<const uint32_t> experts = std::span<const uint32_t>(chosen_).subspan(done, group.value());
        const bool misses = std::any_of(experts.begin(), experts.end(), [&](uint32_t e) { return cache.missed(layer, e); });
        if (misses) compute(experts, false);  // the hits, while the misses are read
        if (Status s = cache.finish_acquire(layer); !s) return s;
        if (done == 0 && predicted_layer_ >= 0) {
            // This layer's first experts are resident: the next MoE layer's predicted ones are read while the rest
            // compute (after this layer's own misses, which went first).
            std::unique_lock<std::mutex> next = cache.lock(static_cast<uint32_t>(predicted_layer_));
            cache.prefetch(static_cast<uint32_t>(predicted_layer_), predicted_next_);
            predicted_layer_ = -1;
        }
        compute(experts, misses);  // the misses; or, without any, the whole group
        for (uint32_t e : experts) {
            const FfnWeights& f = cache.weights(layer, e);
            if (f.down_bias == nullptr) continue;
            const float* b = f32(f.down_bias);
            for (uint32_t r = 0; r < expert_count_[e]; ++r) {
                float* y = ffn_out_.data() + (expert_block_[e] + r) * H;
                for (size_t i = 0; i < H; ++i) y[i] += b[i];
            }
        }
        done += experts.size();
    }
    // A batched step's record goes to its first row's observer (the cache's work is the whole step's).
    if (rows_[0].observer) {
        const ExpertCacheStats after = cache.layer_stats(layer);
        rows_[0].observer->on_cache(CacheRecord{layer, rows_[0].position, n, after.hits - before.hits, after.misses - before.misses,
                                        after.bytes_read - before.bytes_read, after.stall_ns - before.stall_ns,
                                        after.prefetched - before.prefetched, after.predicted - before.predicted,
                                        after.predicted_right - before.predicted_right});
    }
    return Status::ok();
}

}  // namespace colibri
