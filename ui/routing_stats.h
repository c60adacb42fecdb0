// Routing analyses over a run of traces (a conversation, or the same tokens through another model): what papers
// on MoE routing measure and the routing analyses view shows. Pure functions of the traces.
//  - co-activation: per MoE layer, how often two experts are chosen for the same token;
//  - top tokens per expert: which tokens an expert receives most (any of the top-k), and what share of that
//    token's occurrences went to it;
//  - consecutive-token repetition (Mixtral paper, Table 5): how often positions i and i+1 share their first
//    choice, and how often their top-k sets overlap, per layer, against what random routing would give;
//  - next-layer predictability: how well layer L's first choice predicts layer L+1's;
//  - comparing two runs: on the same tokens, where the routing agrees and where it first diverges per position;
//    on any tokens, how far apart the expert usage is (Jensen-Shannon divergence per layer).
#pragma once
#include <QString>
#include <cstdint>
#include <vector>

#include "ui/data/token_trace.h"

namespace colibri::studio {

struct CoActivation {
    int layer = 0;
    int experts = 0;
    int tokens = 0;
    std::vector<int> counts;  // [i * experts + j]: tokens that chose both i and j; the diagonal: chose i
    int at(int i, int j) const { return counts[static_cast<size_t>(i) * static_cast<size_t>(experts) + static_cast<size_t>(j)]; }
    // P(j chosen | i chosen); 0 when i never was.
    double conditional(int i, int j) const { return at(i, i) > 0 ? static_cast<double>(at(i, j)) / at(i, i) : 0.0; }
};
std::vector<CoActivation> co_activation(const std::vector<TokenTrace>& traces, int experts);

struct ExpertToken {
    int32_t token = -1;
    QString text;
    int count = 0;        // times routed to this expert
    int occurrences = 0;  // times the token occurs in the run
};
struct ExpertTokens {
    int expert = 0;
    int activations = 0;
    std::vector<ExpertToken> top;  // most routed first; ties by token id
};
// At one MoE layer, the n tokens each expert receives most.
std::vector<ExpertTokens> top_tokens(const std::vector<TokenTrace>& traces, int layer, int experts, int n);

struct Repetition {
    int layer = 0;
    int pairs = 0;               // consecutive positions, both routed at this layer
    double same_first = 0.0;     // share with the same first-choice expert
    double overlap = 0.0;        // share whose top-k sets share an expert ("first or second choice" for top-2)
};
std::vector<Repetition> consecutive_repetition(const std::vector<TokenTrace>& traces);
// What uniformly random top-k routing over `experts` gives: 1/E for the first choice, and
// 1 - C(E-k, k) / C(E, k) for overlapping sets (Mixtral's 8 experts, top-2: 12.5 % and 46.4 %).
double random_same_first(int experts);
double random_overlap(int experts, int k);

struct Predictability {
    int layer = 0, next_layer = 0;
    int tokens = 0;
    double accuracy = 0.0;  // the next layer's first choice guessed as the most frequent successor of this one's
    double top_k_hit = 0.0; // that guess is among the next layer's top-k
    double baseline = 0.0;  // always guessing the next layer's most frequent first choice
    double mutual_information = 0.0;  // bits between the two first choices
    double normalized_mi = 0.0;       // over the next layer's entropy: 0 independent, 1 determined
};
// Fitted and scored on the same tokens: an upper bound of what a predictor learnt elsewhere would reach.
std::vector<Predictability> next_layer_predictability(const std::vector<TokenTrace>& traces);

struct LayerAgreement {
    int layer = 0;
    int positions = 0;
    double same_first = 0.0;  // first choices equal
    double same_set = 0.0;    // top-k sets equal
    double jaccard = 0.0;     // mean |A ∩ B| / |A ∪ B| of the sets
};
struct UsageDivergence {
    int layer = 0;
    double js_bits = 0.0;              // Jensen-Shannon divergence of the expert shares (0..1 bit)
    std::vector<double> shares_a, shares_b;
};
struct PositionDivergence {
    int position = 0;
    int32_t token = -1;
    QString text;
    int layer = -1;  // first MoE layer whose top-k sets differ; -1: none
    std::vector<int32_t> experts_a, experts_b;  // at that layer
};
struct RoutingComparison {
    bool same_tokens = false;  // per-position agreement is only meaningful on the same tokens
    int positions = 0;         // compared (the shorter run when the tokens agree)
    std::vector<LayerAgreement> layers;
    std::vector<UsageDivergence> usage;
    std::vector<PositionDivergence> divergent;  // positions whose routing differs somewhere, in order
};
RoutingComparison compare_routing(const std::vector<TokenTrace>& a, const std::vector<TokenTrace>& b, int experts);

}  // namespace colibri::studio
