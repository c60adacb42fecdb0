#include "ui/trace_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace colibri::studio {

int ExpertUsage::max_count() const {
    int m = 0;
    for (const auto& row : counts)
        for (int v : row) m = std::max(m, v);
    return m;
}

LayerBalance ExpertUsage::balance(size_t row) const {
    LayerBalance b;
    if (row >= counts.size() || experts <= 0) return b;
    const std::vector<int>& c = counts[row];
    for (int v : c) b.selections += v;
    if (b.selections == 0) return b;
    int busiest = 0;
    for (int e = 0; e < experts; ++e) {
        if (c[static_cast<size_t>(e)] > c[static_cast<size_t>(busiest)]) busiest = e;
        if (c[static_cast<size_t>(e)] == 0) continue;
        const double p = static_cast<double>(c[static_cast<size_t>(e)]) / b.selections;
        b.entropy_bits -= p * std::log2(p);
    }
    b.entropy_ratio = experts > 1 ? b.entropy_bits / std::log2(static_cast<double>(experts)) : 1.0;
    const double mean = static_cast<double>(b.selections) / experts;
    b.max_over_mean = c[static_cast<size_t>(busiest)] / mean;
    b.busiest_expert = busiest;
    return b;
}

ExpertUsage expert_usage(const Conversation& c, const TokenSpan& span, int experts) {
    ExpertUsage u;
    u.experts = std::max(experts, 0);
    std::map<int, std::vector<int>> by_layer;  // ordered by layer
    for (const ConversationToken& t : c.tokens()) {
        if (!span.contains(t)) continue;
        ++u.tokens;
        for (const LayerRouting& r : t.trace.routing) {
            std::vector<int>& row = by_layer[r.layer];
            row.resize(static_cast<size_t>(u.experts), 0);
            for (int32_t e : r.experts)
                if (e >= 0 && e < u.experts) ++row[static_cast<size_t>(e)];
        }
    }
    for (auto& [layer, row] : by_layer) {
        u.layers.push_back(layer);
        u.counts.push_back(std::move(row));
    }
    return u;
}

ProfileTotals profile_totals(const Conversation& c, const TokenSpan& span, int counters) {
    ProfileTotals p;
    std::map<int, StageTotals> layers;
    std::map<std::pair<int, int>, ExpertTotals> experts;
    const size_t n = static_cast<size_t>(std::max(counters, 0));
    auto add = [n](std::vector<uint64_t>& sums, const std::vector<uint64_t>& values) {
        if (sums.size() != n) sums.assign(n, 0);
        for (size_t i = 0; i < n && i < values.size(); ++i) sums[i] += values[i];
    };
    for (const ConversationToken& t : c.tokens()) {
        if (!span.contains(t)) continue;
        ++p.tokens;
        for (const LayerProfile& l : t.trace.layers) {
            StageTotals& s = layers[l.layer];
            ++s.tokens;
            if (t.trace.counted) ++s.counted_tokens;
            s.attention_ns += l.attention_ns;
            s.router_ns += l.router_ns;
            s.experts_ns += l.experts_ns;
            s.counter_ns += l.counter_ns;
            for (size_t i = 0; i < kDeltaNetSteps; ++i) s.deltanet_ns[i] += l.deltanet_ns[i];
            add(s.counters, l.counters);
        }
        // Activations come from the routing, counters from the per-expert records when they were sampled.
        for (const LayerRouting& r : t.trace.routing)
            for (int32_t e : r.experts) {
                ExpertTotals& x = experts[{r.layer, e}];
                x.layer = r.layer;
                x.expert = e;
                ++x.activations;
                if (t.trace.experts_counted) ++x.counted_activations;
                if (x.counters.size() != n) x.counters.assign(n, 0);
            }
        for (const ExpertCounters& e : t.trace.experts) add(experts[{e.layer, e.expert}].counters, e.counters);
    }
    for (auto& [layer, s] : layers) {
        if (s.counters.size() != n) s.counters.assign(n, 0);
        p.layers.push_back(layer);
        p.per_layer.push_back(std::move(s));
    }
    for (auto& [key, e] : experts) p.per_expert.push_back(std::move(e));
    return p;
}

TimeTotals time_totals(const Conversation& c, const TokenSpan& span) {
    TimeTotals t;
    auto add = [](TokenTime& sum, const TokenTime& x) {
        sum.attention += x.attention;
        sum.router += x.router;
        sum.experts += x.experts;
        sum.lm_head += x.lm_head;
        sum.sampling += x.sampling;
        sum.counters += x.counters;
        sum.total += x.total;
    };
    for (const ConversationToken& tok : c.tokens()) {
        if (!span.contains(tok)) continue;
        const TokenTime x = tok.trace.time();
        ++t.tokens;
        add(t.sum, x);
        t.step_ms.push_back(static_cast<double>(x.total) / 1e6);
        if (!tok.trace.generated) continue;
        ++t.generated;
        add(t.generated_sum, x);
        if (tok.trace.counted) {
            ++t.counted;
            t.counted_ns += x.total;
            add(t.counted_sum, x);
            t.counted_step_ms.push_back(static_cast<double>(x.total) / 1e6);
        } else {
            ++t.uncounted;
            t.uncounted_ns += x.total;
            add(t.uncounted_sum, x);
            t.uncounted_step_ms.push_back(static_cast<double>(x.total) / 1e6);
        }
    }
    return t;
}

}  // namespace colibri::studio
