// A server across ranks over a span of the conversation (each position's LayerRanks): per MoE layer each rank's
// median expert time, rank 0's median wait in the exchange and the bytes exchanged per token; over the span the bytes
// per token, the share of the step spent exchanging and the slowest rank. A pure function of the tokens.
#pragma once
#include <vector>

#include "ui/trace_stats.h"

namespace colibri::studio {

struct RankLayerStats {
    int layer = 0;
    int tokens = 0;                   // positions with this layer's rank timings
    std::vector<double> experts_us;   // per rank: the median per token
    double exchange_us = 0;           // rank 0's time in the exchange: the median per token
    double bytes_per_token = 0;       // every rank's rows exchanged, the mean per token
    int slowest = -1;                 // the rank with the largest median here
};

struct RankTotals {
    int ranks = 0;
    int tokens = 0;                   // positions with rank timings
    std::vector<RankLayerStats> layers;  // MoE layers, ascending
    double bytes_per_token = 0;       // summed over the layers
    double exchange_share = 0;        // rank 0's time in exchanges over the positions' steps
    int slowest = -1;                 // the rank with the most expert time over the span
    int slowest_layers = 0;           // the layers where it has the largest median
    double slowest_over_fastest = 0;  // its expert time over the fastest rank's (1: balanced)
};

// Positions whose timings are not for `ranks` ranks are left out (the Studio checked them as they came).
RankTotals rank_totals(const Conversation& c, const TokenSpan& span, int ranks);

}  // namespace colibri::studio
