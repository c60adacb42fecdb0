#include "ui/trace_collector.h"

#include <algorithm>
#include <chrono>
#include <iterator>

namespace colibri::studio {

namespace {
uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

void TraceCollector::begin(int first_position, const std::vector<int32_t>& tokens, const std::vector<QString>& texts, bool generated) {
    first_ = first_position;
    traces_.assign(tokens.size(), TokenTrace{});
    for (size_t i = 0; i < tokens.size(); ++i) {
        TokenTrace& t = traces_[i];
        t.position = first_position + static_cast<int>(i);
        t.token = tokens[i];
        t.text = i < texts.size() ? texts[i] : QString();
        t.generated = generated;
        t.counted = counting();
        t.experts_counted = t.counted && counting_ == Counting::Experts;
    }
    expert_read_ns_ = layer_read_ns_ = 0;
}

TokenTrace* TraceCollector::trace(uint32_t position) {
    const int64_t i = static_cast<int64_t>(position) - first_;
    return i >= 0 && i < static_cast<int64_t>(traces_.size()) ? &traces_[static_cast<size_t>(i)] : nullptr;
}

void TraceCollector::on_routing(const RoutingRecord& r) {
    TokenTrace* t = trace(r.position);
    if (t == nullptr) return;
    LayerRouting out;
    out.layer = static_cast<int>(r.layer);
    out.experts.assign(r.experts.begin(), r.experts.end());
    out.weights.assign(r.weights.begin(), r.weights.end());
    out.probs.assign(r.router_probs.begin(), r.router_probs.end());
    out.selection.assign(r.selection.begin(), r.selection.end());
    out.groups.assign(r.groups.begin(), r.groups.end());
    t->routing.push_back(std::move(out));
}

LayerProfile& TraceCollector::profile(TokenTrace& t, int layer) {
    // Layers arrive in order; the record of the current layer is the last one or a new one.
    if (t.layers.empty() || t.layers.back().layer != layer) {
        t.layers.emplace_back();
        t.layers.back().layer = layer;
    }
    return t.layers.back();
}

void TraceCollector::on_layer_timing(const LayerTiming& lt) {
    TokenTrace* t = trace(lt.position);
    if (t == nullptr) return;
    LayerProfile& p = profile(*t, static_cast<int>(lt.layer));
    p.attention_ns = lt.attention_ns;
    p.router_ns = lt.router_ns;
    std::copy(std::begin(lt.deltanet_ns), std::end(lt.deltanet_ns), p.deltanet_ns.begin());
    // The per-expert counter reads ran inside the experts' stage: they are the profiler's cost, not the experts'.
    p.experts_ns = lt.experts_ns > expert_read_ns_ ? lt.experts_ns - expert_read_ns_ : 0;
    p.counter_ns += expert_read_ns_;
    expert_read_ns_ = 0;
}

void TraceCollector::on_counters(const CounterRecord& c) {
    const uint64_t t0 = now_ns();
    TokenTrace* t = trace(c.position);
    if (t != nullptr) {
        if (c.expert < 0) {
            LayerProfile& p = profile(*t, static_cast<int>(c.layer));
            p.counters.assign(c.values.begin(), c.values.end());
            p.counter_ns += layer_read_ns_ + (now_ns() - t0);
            layer_read_ns_ = 0;
            return;
        }
        t->experts.push_back(ExpertCounters{static_cast<int>(c.layer), c.expert, {c.values.begin(), c.values.end()}});
    }
    expert_read_ns_ += now_ns() - t0;
}

void TraceCollector::on_token_timing(const TokenTiming& tt) {
    TokenTrace* t = trace(tt.position);
    if (t == nullptr) return;
    t->lm_head_ns = tt.lm_head_ns;
    t->step_ns = tt.total_ns;
}

void TraceCollector::on_cache(const CacheRecord& c) {
    TokenTrace* t = trace(c.position);
    if (t == nullptr) return;
    t->cache.push_back(LayerCacheStep{static_cast<int>(c.layer), c.tokens, c.hits, c.misses, c.bytes_read, c.stall_ns,
                                      c.prefetched, c.predicted, c.predicted_right});
}

void TraceCollector::on_prediction(const PredictionRecord& p) {
    TokenTrace* t = trace(p.position);
    if (t == nullptr) return;
    t->predictions.push_back(LayerPrediction{static_cast<int>(p.layer), std::vector<int32_t>(p.experts.begin(), p.experts.end())});
}

void TraceCollector::on_linear_state(const LinearStateRecord& s) {
    TokenTrace* t = trace(s.position);
    if (t == nullptr) return;
    t->linear_states.push_back(LayerLinearState{static_cast<int>(s.layer), {s.state_norms.begin(), s.state_norms.end()},
                                                {s.betas.begin(), s.betas.end()}, {s.decays.begin(), s.decays.end()}});
}

void TraceCollector::start(unsigned slot) {
    const uint64_t t0 = now_ns();
    counters_->start(slot);
    (slot == 0 ? layer_read_ns_ : expert_read_ns_) += now_ns() - t0;
}

std::span<const uint64_t> TraceCollector::stop(unsigned slot) {
    const uint64_t t0 = now_ns();
    const std::span<const uint64_t> v = counters_->stop(slot);
    (slot == 0 ? layer_read_ns_ : expert_read_ns_) += now_ns() - t0;
    return v;
}

}  // namespace colibri::studio
