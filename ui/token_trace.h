// What the Studio keeps about one evaluated position: the token, the router's decision at every MoE layer,
// the time per stage and the perf_event counters per layer and per routed expert. Plain values, so they cross
// from the engine thread to the UI thread by copy in queued signals.
#pragma once
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <vector>

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
    uint64_t attention_ns = 0, router_ns = 0, experts_ns = 0;
    std::vector<uint64_t> counters;  // empty when counters were off; else in CounterSet::names order
};

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

    const LayerRouting* routing_at(int layer) const {
        for (const LayerRouting& r : routing)
            if (r.layer == layer) return &r;
        return nullptr;
    }
};

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
