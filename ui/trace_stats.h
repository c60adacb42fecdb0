// Aggregates over a span of a conversation's traces: expert activation counts and load-balance figures
// (heatmap), and time and counters per layer and per expert (profiler). Pure functions of the tokens.
#pragma once
#include <cstdint>
#include <vector>

#include "ui/conversation.h"

namespace colibri::studio {

struct TokenSpan {
    int from = 0;           // first position
    int to = -1;            // last position, inclusive; -1: the end
    bool generated_only = false;
    bool contains(const ConversationToken& t) const {
        return t.evaluated && t.trace.position >= from && (to < 0 || t.trace.position <= to) && (!generated_only || t.trace.generated);
    }
};

struct LayerBalance {
    int selections = 0;
    double entropy_bits = 0.0;    // of the expert shares
    double entropy_ratio = 0.0;   // entropy / log2(experts): 1 is perfectly balanced
    double max_over_mean = 0.0;   // busiest expert's count over the mean count
    int busiest_expert = -1;
};

struct ExpertUsage {
    int experts = 0;
    std::vector<int> layers;                // MoE layer numbers, one row each
    std::vector<std::vector<int>> counts;   // [row][expert]: tokens routed to the expert
    int tokens = 0;                         // tokens in the span
    int max_count() const;
    LayerBalance balance(size_t row) const;
};

ExpertUsage expert_usage(const Conversation& c, const TokenSpan& span, int experts);

struct StageTotals {
    int tokens = 0;
    uint64_t attention_ns = 0, router_ns = 0, experts_ns = 0;
    std::vector<uint64_t> counters;  // sums
};

struct ExpertTotals {
    int layer = 0, expert = 0;
    int activations = 0;
    std::vector<uint64_t> counters;  // sums
};

struct ProfileTotals {
    std::vector<int> layers;             // layer numbers
    std::vector<StageTotals> per_layer;  // parallel to layers
    std::vector<ExpertTotals> per_expert;  // activated (layer, expert) pairs, ascending
    int tokens = 0;
};

ProfileTotals profile_totals(const Conversation& c, const TokenSpan& span, int counters);

}  // namespace colibri::studio
