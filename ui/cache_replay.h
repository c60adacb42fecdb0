// Replaying the conversation's routing through the expert-cache policies (tools/cache_sim.h, as `colibri
// cache-sim` does with a trace file): hit rate against slots per layer for LRU, LFRU, a pinned hot set learned
// from the conversation itself, Belady's optimum and, when the conversation carries next-layer predictions (a
// RAM budget records them), LRU with prediction. The trace is copied off the conversation on the UI thread; the
// replay runs anywhere and can be cancelled between runs.
#pragma once
#include <QString>
#include <atomic>
#include <cstdint>
#include <vector>

#include "tools/cache_sim.h"

namespace colibri::studio {

class Conversation;

// The conversation's evaluated positions with the routing of every MoE layer (others are left out), as a trace.
// n_experts and top_k from the model; predictions where the traces have them for every kept position.
tools::RoutingTrace conversation_routing(const Conversation& conversation, int n_experts, int top_k);

// Up to max_points slot counts from top_k to n_experts, evenly spread, always including both ends and `also`
// (the loaded cache's own count, when within range).
std::vector<uint32_t> curve_slot_counts(uint32_t top_k, uint32_t n_experts, uint32_t also = 0, uint32_t max_points = 16);

struct CacheCurve {
    QString policy;            // "LRU", "LFRU", "pinned", "Belady", "LRU + prediction"
    std::vector<double> rate;  // hit rate per slot count, 0..1
};

struct CacheCurves {
    std::vector<uint32_t> slot_counts;
    std::vector<CacheCurve> curves;
    int positions = 0;
    bool cancelled = false;
    // The prediction's accuracy over the layers that have predictions (-1 without).
    double prediction_accuracy = -1.0;
    const CacheCurve* curve(const QString& policy) const;
};

CacheCurves replay_curves(const tools::RoutingTrace& trace, const std::vector<uint32_t>& slot_counts, const std::atomic<bool>& cancel);

}  // namespace colibri::studio
