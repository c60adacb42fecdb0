#include "ui/rank_stats.h"

#include <algorithm>
#include <map>

#include "tools/measurement.h"

namespace colibri::studio {

namespace {

double median(const std::vector<double>& v) { return tools::Spread::of(v).median; }

// One layer's samples over the span.
struct LayerSamples {
    std::vector<std::vector<double>> experts_us;  // [rank][token]
    std::vector<double> exchange_us;
    double bytes = 0;
};

}  // namespace

RankTotals rank_totals(const Conversation& c, const TokenSpan& span, int ranks) {
    RankTotals t;
    t.ranks = std::max(ranks, 0);
    if (t.ranks < 2) return t;
    std::map<int, LayerSamples> layers;  // ordered by layer
    std::vector<double> rank_ns(size_t(t.ranks), 0.0);
    double exchange_ns = 0, step_ns = 0, bytes = 0;
    for (const ConversationToken& token : c.tokens()) {
        if (!span.contains(token) || token.trace.ranks.empty()) continue;
        bool counted = false;
        for (const LayerRanks& r : token.trace.ranks) {
            if (r.experts_ns.size() != size_t(t.ranks)) continue;
            counted = true;
            LayerSamples& s = layers[r.layer];
            s.experts_us.resize(size_t(t.ranks));
            for (size_t k = 0; k < r.experts_ns.size(); ++k) {
                s.experts_us[k].push_back(double(r.experts_ns[k]) / 1e3);
                rank_ns[k] += double(r.experts_ns[k]);
            }
            s.exchange_us.push_back(double(r.exchange_ns) / 1e3);
            s.bytes += double(r.bytes);
            exchange_ns += double(r.exchange_ns);
            bytes += double(r.bytes);
        }
        if (!counted) continue;
        ++t.tokens;
        step_ns += double(token.trace.time().total);
    }
    if (t.tokens == 0) return t;
    std::vector<int> slowest_at(size_t(t.ranks), 0);
    for (auto& [layer, s] : layers) {
        RankLayerStats l;
        l.layer = layer;
        l.tokens = static_cast<int>(s.exchange_us.size());
        for (const std::vector<double>& v : s.experts_us) l.experts_us.push_back(median(v));
        l.exchange_us = median(s.exchange_us);
        l.bytes_per_token = s.bytes / l.tokens;
        l.slowest = static_cast<int>(std::max_element(l.experts_us.begin(), l.experts_us.end()) - l.experts_us.begin());
        ++slowest_at[size_t(l.slowest)];
        t.layers.push_back(std::move(l));
    }
    t.bytes_per_token = bytes / t.tokens;
    t.exchange_share = step_ns > 0 ? exchange_ns / step_ns : 0.0;
    t.slowest = static_cast<int>(std::max_element(rank_ns.begin(), rank_ns.end()) - rank_ns.begin());
    t.slowest_layers = slowest_at[size_t(t.slowest)];
    const double fastest = *std::min_element(rank_ns.begin(), rank_ns.end());
    t.slowest_over_fastest = fastest > 0 ? rank_ns[size_t(t.slowest)] / fastest : 0.0;
    return t;
}

}  // namespace colibri::studio
