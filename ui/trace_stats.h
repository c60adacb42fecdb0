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
    int counted_tokens = 0;  // of them, with perf counters read: the counter sums are theirs alone
    uint64_t attention_ns = 0, router_ns = 0, experts_ns = 0;
    uint64_t counter_ns = 0;  // reading the counters (the profiler's own cost, outside the three stages)
    std::vector<uint64_t> counters;  // sums
    std::array<uint64_t, kDeltaNetSteps> deltanet_ns{};  // Gated DeltaNet layers: attention_ns in its steps
};

struct ExpertTotals {
    int layer = 0, expert = 0;
    int activations = 0;
    int counted_activations = 0;     // with the per-expert counters read: the sums are theirs alone
    std::vector<uint64_t> counters;  // sums
};

struct ProfileTotals {
    std::vector<int> layers;             // layer numbers
    std::vector<StageTotals> per_layer;  // parallel to layers
    std::vector<ExpertTotals> per_expert;  // activated (layer, expert) pairs, ascending
    int tokens = 0;
};

ProfileTotals profile_totals(const Conversation& c, const TokenSpan& span, int counters);

// Where the span's tokens spent their time (TokenTrace::time()), and for the generated ones the mean step with
// and without counters, which is what reading the counters costs.
struct TimeTotals {
    int tokens = 0;
    TokenTime sum;
    int generated = 0;
    TokenTime generated_sum;
    int counted = 0, uncounted = 0;  // generated tokens with counters read, and without
    uint64_t counted_ns = 0, uncounted_ns = 0;
    TokenTime counted_sum, uncounted_sum;  // generated tokens, apart: counting slows the step
    // Each token's step in ms: generated ones with and without counters, and every token of the span.
    std::vector<double> counted_step_ms, uncounted_step_ms, step_ms;
    double mean_ms(uint64_t TokenTime::*stage, bool generated_only) const {
        const int n = generated_only ? generated : tokens;
        return n > 0 ? static_cast<double>((generated_only ? generated_sum : sum).*stage) / n / 1e6 : 0.0;
    }
};
TimeTotals time_totals(const Conversation& c, const TokenSpan& span);

}  // namespace colibri::studio
