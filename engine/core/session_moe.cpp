// The MoE block of the forward pass: the router picks each token's experts (RoutingRules, engine/router.h), the
// chunk's tokens are grouped by expert, each chosen expert computes once for all its tokens (through the mapping,
// or the expert cache), the shared expert beside them, and each token sums its experts' outputs in ascending
// expert order. Which experts run and how is decided in run_experts alone: its output is one block of rows per
// chosen expert in ffn_out_, whoever computed it, and combine_experts only reads those blocks. In an expert-parallel
// run (engine/distributed/) each rank computes its share of the blocks (share_experts) and the ranks exchange them
// (exchange_expert_outputs) before combine_experts, which then sums the same bits in the same order as one process.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "engine/core/elementwise.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/session.h"
#include "engine/core/session_internal.h"

namespace colibri {

using namespace format;
using namespace session_internal;

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

Status Session::moe(uint32_t layer, const LayerWeights& w, uint32_t n) {
    route(layer, w, n);
    group_by_expert(n);
    // The MTP head's layer (past n_layers) is neither advised nor predicted, reads its experts through the mapping,
    // and is not counted among the model's expert reads; every rank computes it whole.
    const bool decoder = layer < model_.hparams().n_layers;
    ExpertParallel* const parallel = decoder ? model_.expert_parallel() : nullptr;
    share_experts(layer, parallel);
    if (decoder) expert_reads_.experts += chosen_.size(), ++expert_reads_.layer_passes;
    if (prefetcher_ && decoder) advise_experts(layer, n);
    if (predicting() && decoder) predict_next_layer(layer, n);
    gather_expert_inputs(n);
    // Across ranks every rank times its experts, observed or not: the others' observers get it with its rows.
    const bool ranked = parallel != nullptr && parallel->comm->size() > 1;
    const uint64_t t0 = ranked ? now_ns() : 0;
    if (Status s = run_experts(layer, w, n); !s) return s;
    if (ranked) {
        own_experts_ns_ = now_ns() - t0;
        if (Status s = exchange_expert_outputs(*parallel, layer, n); !s) return s;
    }
    combine_experts(w, n);
    return Status::ok();
}

void Session::route(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const uint64_t t0 = observed_ ? now_ns() : 0;
    route_chunk(w, h_.data(), n, selected_.data(), selected_w_.data());
    if (!observed_) return;
    router_ns_ = now_ns() - t0;
    const uint32_t n_exp = model_.hparams().n_experts, k = model_.hparams().n_experts_active;
    const RoutingRules& routing = model_.rules().routing;
    const uint32_t n_groups = routing.n_group > 1 ? routing.topk_group : 0;
    for (uint32_t t = 0; t < n; ++t)
        if (rows_[t].observer)
            rows_[t].observer->on_routing(RoutingRecord{layer, rows_[t].position, std::span<const int32_t>(selected_.data() + t * k, k),
                                                        std::span<const float>(selected_w_.data() + t * k, k),
                                                        std::span<const float>(router_logits_.data() + t * n_exp, n_exp),
                                                        std::span<const float>(router_probs_.data() + t * n_exp, n_exp),
                                                        std::span<const float>(selection_.data() + t * k, k),
                                                        std::span<const uint32_t>(groups_.data() + t * std::max(n_groups, 1u), n_groups)});
}

void Session::route_chunk(const LayerWeights& w, const float* input, uint32_t n, int32_t* selected, float* weights) {
    const HyperParams& hp = model_.hparams();
    const RoutingRules& routing = model_.rules().routing;
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active;
    const uint32_t n_groups = routing.n_group > 1 ? routing.topk_group : 0;
    matmul(*w.router, input, n, router_logits_.data());
    if (w.router_bias)  // gpt_oss
        for (uint32_t t = 0; t < n; ++t) add_bias(router_logits_.data() + size_t(t) * n_exp, w.router_bias, 0, n_exp);
    const float* selection_bias = w.selection_bias ? f32(w.selection_bias) : nullptr;
    for (uint32_t t = 0; t < n; ++t)
        route_token(options_.router, routing, router_logits_.data() + size_t(t) * n_exp, selection_bias, n_exp, k,
                    RouteOutput{router_probs_.data() + size_t(t) * n_exp, selected + size_t(t) * k, weights + size_t(t) * k,
                                selection_.data() + size_t(t) * k, groups_.data() + size_t(t) * std::max(n_groups, 1u)});
}

void Session::group_by_expert(uint32_t n) {
    // The chunk's (token, slot) choices by expert, in token order; every chosen expert gets a block of rows (one
    // per token that chose it) in expert_in_, gate_, up_ and ffn_out_, in ascending expert order.
    const uint32_t n_exp = model_.hparams().n_experts, k = model_.hparams().n_experts_active;
    std::fill(expert_count_.begin(), expert_count_.end(), 0u);
    for (uint32_t s = 0; s < n * k; ++s) {
        const auto e = static_cast<uint32_t>(selected_[s]);
        expert_rows_[size_t(e) * capacity_ + expert_count_[e]++] = s;
    }
    chosen_.clear();
    uint32_t block = 0;
    for (uint32_t e = 0; e < n_exp; ++e) {
        expert_block_[e] = block;
        if (expert_count_[e] == 0) continue;
        chosen_.push_back(e);
        block += expert_count_[e];
    }
}

void Session::advise_experts(uint32_t layer, uint32_t n) {
    // This layer's experts are known now: start reading all of them before the first one is computed.
    // The next layer's are not, so guess the previous token's choices there.
    const uint32_t k = model_.hparams().n_experts_active;
    for (uint32_t e : computed_) {
        const int32_t id = static_cast<int32_t>(e);
        prefetcher_->prefetch(layer, std::span<const int32_t>(&id, 1));
    }
    if (layer + 1 < model_.hparams().n_layers)
        for (uint32_t s = 0; s < k; ++s)
            if (const int32_t id = predicted_[(layer + 1) * k + s]; id >= 0 && holds(layer + 1, static_cast<uint32_t>(id)))
                prefetcher_->prefetch(layer + 1, std::span<const int32_t>(&id, 1));
    std::copy(selected_.begin() + (n - 1) * k, selected_.begin() + n * k, predicted_.begin() + layer * k);
}

void Session::gather_expert_inputs(uint32_t n) {
    if (n == 1) return;  // a single token's experts all read h_
    const size_t H = model_.hparams().hidden_size;
    const uint32_t k = model_.hparams().n_experts_active;
    for (uint32_t e : computed_) {
        const uint32_t* rows = expert_rows_.data() + size_t(e) * capacity_;
        for (uint32_t r = share_begin_[e]; r < share_begin_[e] + share_rows_[e]; ++r)
            std::copy_n(h_.data() + (rows[r] / k) * H, H, expert_in_.data() + (expert_block_[e] + r) * H);
    }
}

const float* Session::expert_input(uint32_t expert, uint32_t n) const {
    return n > 1 ? expert_in_.data() + expert_block_[expert] * model_.hparams().hidden_size : h_.data();
}

Status Session::run_experts(uint32_t layer, const LayerWeights& w, uint32_t n) {
    const bool shared = w.shared_expert.gate != nullptr;
    // qwen2_moe's shared-expert gate: one row, too small to split among the experts' jobs.
    if (shared && model_.rules().shared_expert_gated) matmul(*w.shared_expert_gate, h_.data(), n, shared_gate_.data());
    ExpertCache* const cache = model_.expert_cache();
    CounterSource* counters = observer_ && observer_->count_experts() ? observer_->counters() : nullptr;  // [counters]; then n == 1
    if (cache != nullptr && layer < model_.hparams().n_layers) {
        if (Status s = cached_experts(layer, n, *cache); !s) return s;
    } else if (counters != nullptr) {
        if (Status s = counted_experts(layer, w, n, *counters); !s) return s;
    } else {
        return mapped_experts(layer, w, n);  // with the shared expert in the same two hand-offs
    }
    if (shared) ffn(w.shared_expert, h_.data(), n, shared_out_.data());
    return Status::ok();
}

Status Session::mapped_experts(uint32_t layer, const LayerWeights& w, uint32_t n) {
    // A .bin.zst decompresses an expert on first use; a damaged frame fails the eval.
    for (uint32_t e : computed_)
        if (Status s = model_.ensure_expert(layer, e); !s) return s;
    // Two hand-offs for all experts: every gate and up projection with the activation, then every down projection.
    gated_jobs_.clear();
    jobs_.clear();
    for (uint32_t e : computed_) queue_expert(w.experts[e], e, n);
    if (w.shared_expert.gate != nullptr) queue_shared_expert(w, n);
    if (gated_jobs_.empty()) return Status::ok();  // a rank with none of the chunk's experts, and no shared expert
    run_gated_matmuls(pool_, gated_jobs_);
    run_matmuls(pool_, jobs_);
    for (uint32_t e : computed_) add_down_bias(w.experts[e], e);
    return Status::ok();
}

Status Session::counted_experts(uint32_t layer, const LayerWeights& w, uint32_t n, CounterSource& counters) {
    // One expert at a time, so each one's counters are its own.
    for (uint32_t e : computed_)
        if (Status s = model_.ensure_expert(layer, e); !s) return s;
    for (uint32_t e : computed_) {
        counters.start(1);
        gated_jobs_.clear();
        jobs_.clear();
        queue_expert(w.experts[e], e, n);
        run_gated_matmuls(pool_, gated_jobs_);
        run_matmuls(pool_, jobs_);
        observer_->on_counters(CounterRecord{layer, position_, static_cast<int32_t>(e), counters.stop(1)});
        add_down_bias(w.experts[e], e);
    }
    return Status::ok();
}

Status Session::cached_experts(uint32_t layer, uint32_t n, ExpertCache& cache) {
    std::unique_lock<std::mutex> lock = cache.lock(layer);
    const ExpertCacheStats before = cache.layer_stats(layer);
    cache.advance(layer, n);
    cache.score_prediction(layer, computed_);
    // Ascending expert order, as many at a time as the layer's slots hold; each group is computed before the
    // next one may evict it. Every output row is the same computation on the same bytes as without a cache.
    // Within a group the resident experts compute while its misses are read, then the misses: each expert writes
    // only its own rows, so the order changes no bit.
    for (size_t done = 0; done < computed_.size();) {
        auto group = cache.begin_acquire(layer, std::span<const uint32_t>(computed_).subspan(done));
        if (!group) return group.status();
        const std::span<const uint32_t> experts = std::span<const uint32_t>(computed_).subspan(done, group.value());
        const bool misses = std::any_of(experts.begin(), experts.end(), [&](uint32_t e) { return cache.missed(layer, e); });
        if (misses) compute_cached(layer, n, cache, experts, false);  // the hits, while the misses are read
        if (Status s = cache.finish_acquire(layer); !s) return s;
        if (done == 0 && predicted_layer_ >= 0) {
            // This layer's first experts are resident: the next MoE layer's predicted ones are read while the rest
            // compute (after this layer's own misses, which went first).
            std::unique_lock<std::mutex> next = cache.lock(static_cast<uint32_t>(predicted_layer_));
            cache.prefetch(static_cast<uint32_t>(predicted_layer_), predicted_next_);
            predicted_layer_ = -1;
        }
        compute_cached(layer, n, cache, experts, misses);  // the misses; or, without any, the whole group
        // The down bias while the expert's slot (which holds it) is still its own.
        for (uint32_t e : experts) add_down_bias(cache.weights(layer, e), e);
        done += experts.size();
    }
    report_cache(layer, n, cache, before);
    return Status::ok();
}

void Session::compute_cached(uint32_t layer, uint32_t n, ExpertCache& cache, std::span<const uint32_t> experts, bool misses) {
    gated_jobs_.clear();
    jobs_.clear();
    for (uint32_t e : experts)
        if (cache.missed(layer, e) == misses) queue_expert(cache.weights(layer, e), e, n);
    if (gated_jobs_.empty()) return;
    run_gated_matmuls(pool_, gated_jobs_);
    run_matmuls(pool_, jobs_);
}

void Session::report_cache(uint32_t layer, uint32_t n, const ExpertCache& cache, const ExpertCacheStats& before) {
    // A batched step's record goes to its first row's observer (the cache's work is the whole step's).
    if (!rows_[0].observer) return;
    const ExpertCacheStats after = cache.layer_stats(layer);
    rows_[0].observer->on_cache(CacheRecord{layer, rows_[0].position, n, after.hits - before.hits, after.misses - before.misses,
                                            after.bytes_read - before.bytes_read, after.stall_ns - before.stall_ns,
                                            after.prefetched - before.prefetched, after.predicted - before.predicted,
                                            after.predicted_right - before.predicted_right});
}

void Session::queue_expert(const FfnWeights& f, uint32_t expert, uint32_t n) {
    const size_t H = model_.hparams().hidden_size;
    const size_t row = size_t(expert_block_[expert]) + share_begin_[expert], rows = share_rows_[expert];
    const size_t at = row * model_.hparams().expert_ffn;
    GatedJob j{f.gate, f.up, expert_input(expert, n) + size_t(share_begin_[expert]) * H, uint32_t(rows), gate_.data() + at, up_.data() + at};
    // gpt_oss: biases on the gate and up projections, and the clamped activation.
    j.gate_bias = f.gate_bias ? f32(f.gate_bias) : nullptr;
    j.up_bias = f.up_bias ? f32(f.up_bias) : nullptr;
    j.limit = model_.rules().swiglu_limit;
    gated_jobs_.push_back(j);
    jobs_.push_back({f.down, gate_.data() + at, uint32_t(rows), ffn_out_.data() + row * H});
}

void Session::queue_shared_expert(const LayerWeights& w, uint32_t n) {
    float* sg = shared_gate_up_.data();
    gated_jobs_.push_back({w.shared_expert.gate, w.shared_expert.up, h_.data(), n, sg, sg + size_t(n) * model_.hparams().shared_expert_ffn});
    jobs_.push_back({w.shared_expert.down, sg, n, shared_out_.data()});
}

void Session::add_down_bias(const FfnWeights& f, uint32_t expert) {
    if (f.down_bias == nullptr) return;
    const size_t H = model_.hparams().hidden_size;
    const float* b = f32(f.down_bias);
    for (uint32_t r = share_begin_[expert]; r < share_begin_[expert] + share_rows_[expert]; ++r) {
        float* y = ffn_out_.data() + (expert_block_[expert] + r) * H;
        for (size_t i = 0; i < H; ++i) y[i] += b[i];
    }
}

void Session::combine_experts(const LayerWeights& w, uint32_t n) {
    // Each token sums its experts' outputs in ascending expert order (as transformers' index_add_ loop does),
    // then the shared expert (gated: qwen2_moe; else with weight 1).
    const size_t H = model_.hparams().hidden_size;
    const uint32_t k = model_.hparams().n_experts_active;
    std::fill(moe_out_.begin(), moe_out_.begin() + n * H, 0.0f);
    for (uint32_t e : chosen_) {
        const uint32_t* rows = expert_rows_.data() + size_t(e) * capacity_;
        for (uint32_t r = 0; r < expert_count_[e]; ++r) {
            const float weight = selected_w_[rows[r]];
            float* out = moe_out_.data() + (rows[r] / k) * H;
            const float* y = ffn_out_.data() + (expert_block_[e] + r) * H;
            for (size_t i = 0; i < H; ++i) out[i] += weight * y[i];
        }
    }
    if (w.shared_expert.gate == nullptr) return;
    const bool gated = model_.rules().shared_expert_gated;
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

bool Session::holds(uint32_t layer, uint32_t expert) const {
    const ExpertParallel* parallel = model_.expert_parallel();
    return parallel == nullptr || layer >= model_.hparams().n_layers || parallel->placement.holds(layer, expert, parallel->comm->rank());
}

void Session::share_experts(uint32_t layer, const ExpertParallel* parallel) {
    computed_.clear();
    for (uint32_t e : chosen_) {
        const ExpertPlacement::Share share =
            parallel ? parallel->placement.share(layer, e, parallel->comm->rank(), expert_count_[e]) : ExpertPlacement::Share{0, expert_count_[e]};
        share_begin_[e] = share.begin;
        share_rows_[e] = share.count;
        if (share.count > 0) computed_.push_back(e);
    }
}

Status Session::exchange_expert_outputs(ExpertParallel& parallel, uint32_t layer, uint32_t n) {
    // Each rank's rows travel in ascending expert order; every rank knows every other's shares from the routing, so
    // it can size and place what it receives. The chunk's (token, slot) rows are each computed by exactly one rank.
    // Behind its rows each rank sends its run_experts time (a fixed 8 bytes), so every rank learns every rank's
    // without another collective; the rows' bytes alone are counted as the exchange's.
    constexpr size_t kTrailer = sizeof(uint64_t);
    const uint64_t t0 = now_ns();
    const size_t H = model_.hparams().hidden_size, row_bytes = H * sizeof(float);
    Communicator& comm = *parallel.comm;
    const uint32_t me = comm.rank(), ranks = comm.size();
    if (exchange_counts_.size() != ranks) return error("expert parallelism: this session was made before the model joined the ranks");
    std::fill(exchange_counts_.begin(), exchange_counts_.end(), size_t(0));
    size_t sent = 0;
    for (uint32_t e : chosen_)
        for (uint32_t r = 0; r < ranks; ++r) exchange_counts_[r] += parallel.placement.share(layer, e, r, expert_count_[e]).count * row_bytes;
    for (uint32_t e : computed_) {
        std::memcpy(exchange_send_.data() + sent, ffn_out_.data() + (size_t(expert_block_[e]) + share_begin_[e]) * H, share_rows_[e] * row_bytes);
        sent += share_rows_[e] * row_bytes;
    }
    std::memcpy(exchange_send_.data() + sent, &own_experts_ns_, kTrailer);
    size_t total = 0;
    for (uint32_t r = 0; r < ranks; ++r) {
        exchange_counts_[r] += kTrailer;
        exchange_at_[r] = total;
        total += exchange_counts_[r];
    }
    if (Status s = comm.allgatherv(std::span<const uint8_t>(exchange_send_.data(), sent + kTrailer), std::span<uint8_t>(exchange_recv_.data(), total),
                                   exchange_counts_);
        !s)
        return s;
    for (uint32_t e : chosen_)
        for (uint32_t r = 0; r < ranks; ++r) {
            const ExpertPlacement::Share share = parallel.placement.share(layer, e, r, expert_count_[e]);
            if (share.count == 0) continue;
            if (r != me)
                std::memcpy(ffn_out_.data() + (size_t(expert_block_[e]) + share.begin) * H, exchange_recv_.data() + exchange_at_[r],
                            share.count * row_bytes);
            exchange_at_[r] += share.count * row_bytes;
        }
    // Each rank's rows are placed: its trailer follows them.
    for (uint32_t r = 0; r < ranks; ++r) std::memcpy(&rank_experts_ns_[r], exchange_recv_.data() + exchange_at_[r], kTrailer);
    const uint64_t rows = total - ranks * kTrailer, wait = now_ns() - t0;
    exchange_stats_.exchanges += 1;
    exchange_stats_.bytes_sent += sent;
    exchange_stats_.bytes_received += rows - sent;
    exchange_stats_.wait_ns += wait;
    if (observed_) report_ranks(layer, n, wait, sent, rows - sent);
    return Status::ok();
}

void Session::report_ranks(uint32_t layer, uint32_t n, uint64_t exchange_ns, uint64_t sent, uint64_t received) {
    // Times split evenly among the chunk's tokens (as LayerTiming's); bytes too, the remainder on the last token.
    for (size_t r = 0; r < rank_share_ns_.size(); ++r) rank_share_ns_[r] = rank_experts_ns_[r] / n;
    for (uint32_t t = 0; t < n; ++t) {
        if (!rows_[t].observer) continue;
        const bool last = t + 1 == n;
        const uint64_t out = sent / n + (last ? sent % n : 0), in = received / n + (last ? received % n : 0);
        rows_[t].observer->on_rank_timing(RankTiming{layer, rows_[t].position, rank_share_ns_, exchange_ns / n, out + in, out, in});
    }
}

void Session::ffn(const FfnWeights& w, const float* x, uint32_t n, float* out) {
    const GatedJob gate_up{w.gate, w.up, x, n, gate_.data(), up_.data()};
    run_gated_matmuls(pool_, std::span<const GatedJob>(&gate_up, 1));
    matmul(*w.down, gate_.data(), n, out);
}

bool Session::predicting() const {
    const ExpertCache* cache = model_.expert_cache();
    return options_.predict_experts || (cache != nullptr && cache->prefetching());
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
    const uint32_t n_exp = hp.n_experts, k = hp.n_experts_active;
    // The residual stream as it is now (before the current layer's MoE, or the embeddings for the first MoE
    // layer), under the target layer's norm: what its router will see, less what comes in between. route_chunk's
    // scratch (logits, scores, selection values, groups) is free once this layer's routing was reported.
    norm_rows(*w.ffn_norm, n, predict_in_.data());
    route_chunk(w, predict_in_.data(), n, predict_selected_.data(), predict_w_.data());
    std::fill(predict_mark_.begin(), predict_mark_.end(), uint8_t(0));
    for (uint32_t s = 0; s < n * k; ++s) predict_mark_[static_cast<uint32_t>(predict_selected_[s])] = 1;
    predicted_next_.clear();
    for (uint32_t e = 0; e < n_exp; ++e)
        if (predict_mark_[e] && holds(target, e)) predicted_next_.push_back(e);
    if (observed_)
        for (uint32_t t = 0; t < n; ++t)
            if (rows_[t].observer)
                rows_[t].observer->on_prediction(PredictionRecord{target, rows_[t].position, std::span<const int32_t>(predict_selected_.data() + size_t(t) * k, k)});
}

}  // namespace colibri
