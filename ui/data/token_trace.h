// What the Studio keeps about one evaluated position: the token, the router's decision at every MoE layer,
// the time per stage and the perf_event counters per layer and per routed expert. Plain values, so they cross
// from the engine thread to the UI thread by copy in queued signals.
#pragma once
#include <QMetaType>
#include <array>
#include <QString>
#include <QStringList>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/trace.h"

namespace colibri::studio {

struct LayerRouting {
    int layer = 0;
    std::vector<int32_t> experts;  // selected, descending weight
    std::vector<float> weights;    // what each expert's output is multiplied by (normalisation and scaling done)
    std::vector<float> probs;      // the router's scores over all experts (softmax probabilities, or sigmoids)
    std::vector<float> selection;  // per selected expert, the value it was selected by (score + selection bias)
    std::vector<uint32_t> groups;  // the expert groups the choice was limited to; empty without groups
};

struct LayerProfile {
    int layer = 0;
    uint64_t attention_ns = 0, router_ns = 0, experts_ns = 0;  // experts_ns without the counter reads inside it
    uint64_t counter_ns = 0;         // reading the counters at this layer: the profiler's own cost
    std::vector<uint64_t> counters;  // empty when counters were off; else in CounterSet::names order
    std::array<uint64_t, kDeltaNetSteps> deltanet_ns{};  // a Gated DeltaNet layer's attention_ns in its steps
};

// One of the most likely tokens where a generated token was sampled: the model's distribution (softmax of
// the logits, before temperature and the other sampling settings).
struct TokenAlternative {
    int32_t token = -1;
    QString text;
    float probability = 0.0f;
};

// Where one position's time went, in nanoseconds. total is the whole step: for a generated token from the
// start of its sampling to the end of its evaluation, for a prompt token its share of the chunk it was
// evaluated in; other is what total holds beyond the named stages (embedding, bookkeeping).
struct TokenTime {
    uint64_t attention = 0, router = 0, experts = 0, lm_head = 0, sampling = 0, counters = 0, total = 0;
    uint64_t named() const { return attention + router + experts + lm_head + sampling + counters; }
    uint64_t other() const { return total > named() ? total - named() : 0; }
};

// The expert cache (a RAM budget) at one MoE layer over the evaluation that ended at this position: one token,
// or a prompt chunk of `tokens` tokens (then recorded on the chunk's first position).
struct LayerCacheStep {
    int layer = 0;
    uint32_t tokens = 0;
    uint64_t hits = 0, misses = 0, bytes_read = 0, stall_ns = 0;
    uint64_t prefetched = 0, predicted = 0, predicted_right = 0;
};

// The experts predicted for a MoE layer at the MoE layer before it (the next layer's router on that layer's
// hidden state), top-k by descending weight.
struct LayerPrediction {
    int layer = 0;
    std::vector<int32_t> experts;
};

// A Gated DeltaNet layer after this token, per value head: the recurrent state's Frobenius norm, the write
// strength β and the decay the state was multiplied by before the write.
struct LayerLinearState {
    int layer = 0;
    std::vector<float> norms, betas, decays;
};

// A server across ranks at one MoE layer (engine/core/trace.h RankTiming, the trace extension's `ranks`): each
// rank's time in its share of the experts, rank 0's time in the exchange, and the expert rows the exchange moved
// (every rank's, and rank 0's own out and the others' in). This token's share of the step it was evaluated in.
struct LayerRanks {
    int layer = 0;
    std::vector<uint64_t> experts_ns;  // per rank
    uint64_t exchange_ns = 0;
    uint64_t bytes = 0, bytes_sent = 0, bytes_received = 0;
};

struct CacheSnapshot;  // ui/cache_state.h

struct ExpertCounters {
    int layer = 0;
    int expert = 0;
    std::vector<uint64_t> counters;
};

struct TokenTrace {
    int position = -1;
    int32_t token = -1;
    QString text;            // shown text (may be empty while a character spans several tokens)
    bool generated = false;  // sampled by the model rather than part of a prompt
    std::vector<LayerRouting> routing;  // MoE layers, ascending
    std::vector<LayerProfile> layers;   // every layer, ascending
    std::vector<ExpertCounters> experts;
    uint64_t lm_head_ns = 0;   // final norm and lm head (tokens whose logits were computed)
    uint64_t sampling_ns = 0;  // the sampler (generated tokens)
    uint64_t step_ns = 0;      // see TokenTime::total
    bool counted = false;          // perf counters were read per layer for this position
    bool experts_counted = false;  // ... and per routed expert
    float probability = -1.0f;     // generated tokens: the model's probability of this token; -1 unknown
    std::vector<TokenAlternative> alternatives;  // generated tokens: the top 5 where it was sampled
    std::vector<LayerCacheStep> cache;             // with a RAM budget
    std::vector<LayerPrediction> predictions;      // with a RAM budget: MoE layers after the first
    std::vector<LayerLinearState> linear_states;   // Gated DeltaNet layers, ascending
    std::vector<LayerRanks> ranks;                 // a server across ranks: MoE layers, ascending
    // With a RAM budget, on the last position of each evaluation: every layer's slots after it (immutable, shared).
    std::shared_ptr<const CacheSnapshot> cache_state;
    TokenTime time() const;

    const LayerLinearState* linear_state_at(int layer) const {
        for (const LayerLinearState& s : linear_states)
            if (s.layer == layer) return &s;
        return nullptr;
    }
    const LayerRouting* routing_at(int layer) const {
        for (const LayerRouting& r : routing)
            if (r.layer == layer) return &r;
        return nullptr;
    }
};

inline TokenTime TokenTrace::time() const {
    TokenTime t;
    for (const LayerProfile& l : layers) {
        t.attention += l.attention_ns;
        t.router += l.router_ns;
        t.experts += l.experts_ns;
        t.counters += l.counter_ns;
    }
    t.lm_head = lm_head_ns;
    t.sampling = sampling_ns;
    t.total = std::max(step_ns, t.named());
    return t;
}

// The counters a loaded model's traces carry, and what the profiler says about those it could not open.
struct CounterSet {
    QStringList names;
    QStringList hardware_names;  // the subset of names that are hardware events
    QString hardware_status;     // empty when every offered hardware event counts
    QString software_status;
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::TokenTrace)
Q_DECLARE_METATYPE(colibri::studio::CounterSet)
