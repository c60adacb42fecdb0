#include "engine/core/session.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>

#include "engine/core/elementwise.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/rope.h"
#include "engine/core/session_internal.h"
#include "engine/core/session_mirror.h"
#include "kernels/matvec.h"

#ifndef COLIBRI_HUGEPAGE_DEFAULT
#define COLIBRI_HUGEPAGE_DEFAULT 0
#endif

namespace colibri {

using namespace format;
using namespace session_internal;

namespace {

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

bool env_flag(const char* name, bool fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    return std::strcmp(v, "0") != 0;
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
    context_ = context != 0 ? context : std::min<uint32_t>(hp.max_position ? hp.max_position : 4096, 4096);
    capacity_ = std::clamp<uint32_t>(options_.chunk, 1, SessionOptions::kMaxChunk);
    options_.chunk = capacity_;
    mtp_ = options_.mtp && !model.mtp_layers().empty();
    plan_caches();
    size_buffers();
    if (mtp_) size_mtp_buffers();
}

void Session::plan_caches() {
    // Each layer's share of the caches, by its token mixer. A sliding layer's ring holds its window and one chunk
    // more: a chunk writes all its keys before it attends, and must not overwrite a position an earlier token of
    // it still needs.
    const HyperParams& hp = model_.hparams();
    const AttentionRules& ar = model_.rules().attention;
    const size_t C = capacity_;
    const size_t context_slots = (size_t(context_) + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
    // The MTP head's first layer (the one that drafts) has its cache after the decoder layers'.
    caches_.resize(hp.n_layers + (mtp_ ? 1 : 0));
    size_t k_total = 0, v_total = 0, linear_total = 0;
    for (uint32_t l = 0; l < caches_.size(); ++l) {
        LayerCache& c = caches_[l];
        const LayerWeights& w = l < hp.n_layers ? model_.layers()[l] : model_.mtp_layers()[0];
        switch (w.mixer) {
            case TokenMixer::Attention:
                c.heads = hp.n_kv_heads;
                c.key_dim = c.value_dim = hp.head_dim;
                break;
            case TokenMixer::LatentAttention:  // one "head": key [kv latent, rope key], value the latent
                c.heads = 1;
                c.key_dim = ar.kv_lora_rank + ar.rotary_dim;
                c.value_dim = ar.kv_lora_rank;
                break;
            case TokenMixer::GatedDeltaNet:  // no KV cache: a conv state and a recurrent state (linear_state_)
                c.state_offset = linear_total;
                linear_total += linear_state_floats(hp);
                break;
        }
        c.held = static_cast<uint32_t>(context_slots);
        if (w.sliding && ar.sliding_window > 0) {
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
    linear_state_.assign(linear_total, 0.0f);
    recurrent_ = linear_total != 0;
    if (recurrent_) history_.reserve(context_);
}

void Session::size_buffers() {
    const HyperParams& hp = model_.hparams();
    const ModelRules& rules = model_.rules();
    const AttentionRules& ar = rules.attention;
    const ActivationAllocator<float> alloc(options_.huge_pages);
    auto sized = [&](ActivationBuffer<float>& b, size_t n) {
        b = ActivationBuffer<float>(alloc);
        b.resize(n);
    };
    const size_t C = capacity_, H = hp.hidden_size;
    const size_t kv_dim = size_t(hp.n_kv_heads) * hp.head_dim, q_dim = size_t(hp.n_heads) * hp.head_dim;
    // The token mixers'.
    const size_t att_dim = ar.mla ? size_t(hp.n_heads) * ar.v_head_dim : q_dim;
    const size_t k_dim = ar.mla ? size_t(ar.kv_lora_rank) + ar.rotary_dim : kv_dim;
    sized(x_, C * H);
    sized(h_, C * H);
    sized(q_, C * q_dim);
    sized(q_low_, C * std::max<size_t>(ar.q_lora_rank, 1));
    sized(k_, C * k_dim);
    sized(v_, C * kv_dim);
    sized(att_, C * std::max<size_t>(att_dim, size_t(hp.linear_value_heads) * hp.linear_value_dim));
    if (ar.output_gate) sized(attn_gate_, C * q_dim);
    if (hp.linear_key_heads != 0) size_linear_buffers();
    sized(proj_, C * H);
    sized(rope_cos_, C * std::max<size_t>(model_.rope().inv_freq.size(), 1));
    sized(rope_sin_, rope_cos_.size());
    const size_t group = ar.mla ? 1 : hp.n_heads / std::max(hp.n_kv_heads, 1u);
    sized(scores_, size_t(pool_.size()) * group * max_slots_);
    size_t max_window = 0;
    for (const LayerCache& c : caches_) max_window = std::max<size_t>(max_window, c.window ? c.held : 0);
    sized(values_, size_t(pool_.size()) * max_window * hp.head_dim);
    if (ar.mla) {
        sized(latent_q_, C * hp.n_heads * k_dim);
        sized(latent_out_, C * hp.n_heads * ar.kv_lora_rank);
    }
    // The FFN's and the MoE's.
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
    if (options_.prefetch_experts && model_.expert_cache() == nullptr) prefetcher_ = std::make_unique<ExpertPrefetcher>(model_);
    chosen_.reserve(n_exp);
    computed_.reserve(n_exp);
    share_begin_.assign(n_exp, 0);
    share_rows_.assign(n_exp, 0);
    if (const ExpertParallel* parallel = model_.expert_parallel(); parallel != nullptr && parallel->comm->size() > 1) {
        // The rows, and behind each rank's its run_experts time (8 bytes).
        const size_t ranks = parallel->comm->size();
        exchange_send_.resize(C * k * H * sizeof(float) + sizeof(uint64_t));
        exchange_recv_.resize(C * k * H * sizeof(float) + ranks * sizeof(uint64_t));
        exchange_counts_.resize(ranks);
        exchange_at_.resize(ranks);
        rank_experts_ns_.resize(ranks);
        rank_share_ns_.resize(ranks);
    }
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
    if (mtp_ && !mtp_hidden_.populate(size_t(kv_resident_) * model_.hparams().hidden_size,
                                      size_t(target - kv_resident_) * model_.hparams().hidden_size))
        return error("out of memory for the MTP head's hidden states at position " + std::to_string(end));
    kv_resident_ = target;
    return Status::ok();
}

void Session::matmul(const TensorView& w, const float* x, uint32_t n, float* y) {
    const MatmulJob job{&w, x, n, y};
    run_matmuls(pool_, std::span<const MatmulJob>(&job, 1));
}

Status Session::check_input(std::span<const int32_t> tokens) const {
    COLIBRI_TRY(check_token_ids(model_, tokens));
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
    if (!mirror_) return evaluate(tokens);
    if (tokens.empty()) return error("no tokens to evaluate");
    if (Status s = check_input(tokens); !s) return s;
    const auto held = mirror_->hold();  // from telling the other ranks to the last exchange
    COLIBRI_TRY(mirror_->eval(mirror_slot_, tokens, false));
    return evaluate(tokens);
}

void Session::set_router(RouterKind kind) {
    if (mirror_) (void)mirror_->set_router(mirror_slot_, static_cast<uint32_t>(kind));  // a loss shows at the next eval
    options_.router = kind;
}

Result<std::span<const float>> Session::evaluate(std::span<const int32_t> tokens) {
    if (tokens.empty()) return error("no tokens to evaluate");
    if (Status s = check_input(tokens); !s) return s;
    // Counters are sampled per token: with a counting observer, chunks are single tokens.
    const size_t chunk = observer_ && observer_->counters() ? 1 : capacity_;
    for (size_t i = 0; i < tokens.size();) {
        const uint32_t n = chunk_limit(static_cast<uint32_t>(std::min(chunk, tokens.size() - i)));
        const bool last = i + n == tokens.size();
        if (Status s = eval_chunk(tokens.data() + i, n, last); !s) return s;
        after_chunk(tokens.data() + i, n, last && tokens.size() > 1);
        i += n;
    }
    return std::span<const float>(logits_);
}

Status Session::eval_chunk(const int32_t* tokens, uint32_t n, bool with_logits, bool every_row) {
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
    if (every_row) logits_rows(0, n, *this);
    else if (with_logits) logits_of(n - 1, *this);
    if (observer_) report_token_timing(*observer_, first, n, (head_t0 - chunk_t0) / n, with_logits || every_row ? now_ns() - head_t0 : 0);
    if (mtp_) return mtp_follow(tokens, first, n);
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
    for (const Part& p : parts) p.session->rope_rows(p.count);
    if (predicting()) predict_first_moe_layer(n);
    const HyperParams& hp = model_.hparams();
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        const LayerWeights& w = model_.layers()[l];
        CounterSource* counters = observer_ ? observer_->counters() : nullptr;  // [counters]; then n == 1
        if (counters) counters->start(0);
        const uint64_t t0 = observed_ ? now_ns() : 0;
        uint64_t t1 = 0;
        if (Status s = decoder_layer(parts, l, w, n, &t1); !s) return s;
        if (observed_) report_layer(l, n, t0, t1, counters);
    }
    return Status::ok();
}

Status Session::decoder_layer(std::span<const Part> parts, uint32_t layer, const LayerWeights& w, uint32_t n, uint64_t* t1) {
    norm_rows(*w.attn_norm, n, h_.data());
    std::fill_n(deltanet_ns_, kDeltaNetSteps, 0);
    mix_tokens(parts, layer, w);
    add_residual(proj_.data(), n);
    *t1 = observed_ ? now_ns() : 0;
    norm_rows(*w.ffn_norm, n, h_.data());
    if (Status s = feed_forward(layer, w, n); !s) return s;
    add_residual(moe_out_.data(), n);
    return Status::ok();
}

void Session::norm_rows(const TensorView& weight, uint32_t n, float* out) {
    const HyperParams& hp = model_.hparams();
    const size_t H = hp.hidden_size;
    for (uint32_t i = 0; i < n; ++i) rmsnorm(x_.data() + i * H, f32(&weight), hp.rms_eps, H, out + i * H);
}

void Session::add_residual(const float* y, uint32_t n) {
    float* x = x_.data();
    const size_t count = size_t(n) * model_.hparams().hidden_size;
    for (size_t i = 0; i < count; ++i) x[i] += y[i];
}

void Session::mix_tokens(std::span<const Part> parts, uint32_t layer, const LayerWeights& w) {
    // This session's buffers hold the chunk's rows; each part's mixer runs in its own session (its cache, its
    // positions, its rotations), on a copy of its rows when that session is not this one.
    const size_t H = model_.hparams().hidden_size;
    for (const Part& p : parts) {
        Session& s = *p.session;
        if (&s != this) std::copy_n(h_.data() + size_t(p.row) * H, size_t(p.count) * H, s.h_.data());
        switch (w.mixer) {
            case TokenMixer::Attention: s.attention(layer, w, p.count); break;
            case TokenMixer::LatentAttention: s.latent_attention(layer, w, p.count); break;
            case TokenMixer::GatedDeltaNet:
                if (&s != this) std::fill_n(s.deltanet_ns_, kDeltaNetSteps, 0);
                s.gated_deltanet(layer, w, p.count);
                // The parts' steps together, split evenly among the chunk's rows like the stages' times.
                if (&s != this)
                    for (size_t i = 0; i < kDeltaNetSteps; ++i) deltanet_ns_[i] += s.deltanet_ns_[i];
                break;
        }
        if (&s != this) std::copy_n(s.proj_.data(), size_t(p.count) * H, proj_.data() + size_t(p.row) * H);
    }
}

Status Session::feed_forward(uint32_t layer, const LayerWeights& w, uint32_t n) {
    router_ns_ = 0;
    if (w.is_moe) return moe(layer, w, n);
    ffn(w.dense, h_.data(), n, moe_out_.data());
    return Status::ok();
}

void Session::report_layer(uint32_t layer, uint32_t n, uint64_t t0, uint64_t t1, CounterSource* counters) {
    const uint64_t t2 = now_ns();
    for (uint32_t i = 0; i < n; ++i)
        if (rows_[i].observer)
            rows_[i].observer->on_layer_timing(LayerTiming{layer, rows_[i].position, (t1 - t0) / n, router_ns_ / n, (t2 - t1 - router_ns_) / n,
                                                           {deltanet_ns_[0] / n, deltanet_ns_[1] / n, deltanet_ns_[2] / n,
                                                            deltanet_ns_[3] / n, deltanet_ns_[4] / n, deltanet_ns_[5] / n}});
    if (counters) observer_->on_counters(CounterRecord{layer, position_, -1, counters->stop(0)});  // [counters]
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
        if (p.session->mirror_ != lead.mirror_) return error("the sessions of a batch must share one mirror");
        for (size_t j = 0; j < i; ++j)
            if (parts[j].session == p.session) return error("a session appears twice in one batch");
        if (Status s = p.verify ? p.session->check_verify(p.tokens) : p.session->check_input(p.tokens); !s) return s;
        total += p.tokens.size();
        counting = counting || (p.session->observer_ && p.session->observer_->counters());
    }
    // Counters are sampled per token (see eval): such a batch is evaluated sequence by sequence.
    if (counting) {
        for (const BatchPart& p : parts)
            if (auto r = p.verify ? p.session->verify(p.tokens) : p.session->eval(p.tokens); !r) return r.status();
        return Status::ok();
    }
    if (total > lead.capacity_)
        return error("a batch of " + std::to_string(total) + " tokens exceeds the chunk capacity of " + std::to_string(lead.capacity_));
    // Across ranks the step is told as one (the counting path above tells each part's own evaluation).
    std::unique_lock<std::recursive_mutex> held;
    if (SessionMirror* mirror = lead.mirror_) {
        std::vector<SessionMirror::Part> told;
        for (const BatchPart& p : parts) told.push_back({p.session->mirror_slot_, p.tokens, p.verify});
        held = mirror->hold();
        COLIBRI_TRY(mirror->eval_batch(told));
    }

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
    for (const BatchPart& p : parts)
        if (p.verify) p.session->begin_verify(static_cast<uint32_t>(p.tokens.size()));
    const Status evaluated = lead.layers(rows, row);
    for (const BatchPart& p : parts)
        if (p.verify) p.session->end_verify(p.tokens, evaluated.is_ok());
    if (!evaluated) return evaluated;
    // The body's time is split evenly among the step's rows; each part's logits are its own head.
    const uint64_t body = (now_ns() - step_t0) / row;
    for (const Part& p : rows) {
        Session& s = *p.session;
        const uint32_t first = s.position_;
        s.position_ += p.count;
        if (s.mtp_) s.mtp_position_ = 0, s.mtp_row_drafted_ = false, s.mtp_ = false;  // batched rows do not feed the head (session_mtp.cpp)
        const BatchPart& part = parts[&p - rows.data()];
        if (!part.verify) s.after_chunk(part.tokens.data(), p.count, p.count > 1);
        const uint64_t head_t0 = s.observer_ ? now_ns() : 0;
        if (part.verify) lead.logits_rows(p.row, p.count, s);
        else lead.logits_of(p.row + p.count - 1, s);
        if (s.observer_) report_token_timing(*s.observer_, first, p.count, body, now_ns() - head_t0);
    }
    return Status::ok();
}

}  // namespace colibri
