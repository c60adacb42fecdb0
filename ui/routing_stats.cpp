#include "ui/routing_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace colibri::studio {

namespace {

bool in_range(int32_t e, int experts) { return e >= 0 && e < experts; }

// The MoE layer numbers the traces route at, ascending.
std::vector<int> routed_layers(const std::vector<TokenTrace>& traces) {
    std::set<int> layers;
    for (const TokenTrace& t : traces)
        for (const LayerRouting& r : t.routing) layers.insert(r.layer);
    return {layers.begin(), layers.end()};
}

double entropy_bits(const std::map<int, int>& counts, int total) {
    double h = 0;
    for (const auto& [_, c] : counts)
        if (c > 0) {
            const double p = static_cast<double>(c) / total;
            h -= p * std::log2(p);
        }
    return h;
}

std::set<int32_t> as_set(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

std::vector<CoActivation> co_activation(const std::vector<TokenTrace>& traces, int experts) {
    std::vector<CoActivation> out;
    if (experts <= 0) return out;
    std::map<int, size_t> index;
    for (int layer : routed_layers(traces)) {
        index[layer] = out.size();
        CoActivation c;
        c.layer = layer;
        c.experts = experts;
        c.counts.assign(static_cast<size_t>(experts) * static_cast<size_t>(experts), 0);
        out.push_back(std::move(c));
    }
    for (const TokenTrace& t : traces)
        for (const LayerRouting& r : t.routing) {
            CoActivation& c = out[index[r.layer]];
            ++c.tokens;
            for (int32_t i : r.experts)
                for (int32_t j : r.experts)
                    if (in_range(i, experts) && in_range(j, experts)) ++c.counts[static_cast<size_t>(i) * experts + static_cast<size_t>(j)];
        }
    return out;
}

std::vector<ExpertTokens> top_tokens(const std::vector<TokenTrace>& traces, int layer, int experts, int n) {
    std::vector<ExpertTokens> out(static_cast<size_t>(std::max(experts, 0)));
    for (int e = 0; e < experts; ++e) out[static_cast<size_t>(e)].expert = e;
    std::map<int32_t, int> occurrences;
    std::map<int32_t, QString> texts;
    std::vector<std::map<int32_t, int>> routed(out.size());
    for (const TokenTrace& t : traces) {
        const LayerRouting* r = t.routing_at(layer);
        if (r == nullptr) continue;
        ++occurrences[t.token];
        if (!texts.count(t.token)) texts[t.token] = t.text;
        for (int32_t e : r->experts)
            if (in_range(e, experts)) {
                ++routed[static_cast<size_t>(e)][t.token];
                ++out[static_cast<size_t>(e)].activations;
            }
    }
    for (size_t e = 0; e < out.size(); ++e) {
        std::vector<ExpertToken> all;
        for (const auto& [token, count] : routed[e]) all.push_back({token, texts[token], count, occurrences[token]});
        std::sort(all.begin(), all.end(), [](const ExpertToken& a, const ExpertToken& b) {
            return a.count != b.count ? a.count > b.count : a.token < b.token;
        });
        if (static_cast<int>(all.size()) > n) all.resize(static_cast<size_t>(std::max(n, 0)));
        out[e].top = std::move(all);
    }
    return out;
}

std::vector<Repetition> consecutive_repetition(const std::vector<TokenTrace>& traces) {
    std::vector<Repetition> out;
    for (int layer : routed_layers(traces)) {
        Repetition rep;
        rep.layer = layer;
        int first = 0, overlap = 0;
        for (size_t i = 0; i + 1 < traces.size(); ++i) {
            if (traces[i + 1].position != traces[i].position + 1) continue;  // only neighbours in the sequence
            const LayerRouting* a = traces[i].routing_at(layer);
            const LayerRouting* b = traces[i + 1].routing_at(layer);
            if (a == nullptr || b == nullptr || a->experts.empty() || b->experts.empty()) continue;
            ++rep.pairs;
            if (a->experts.front() == b->experts.front()) ++first;
            const std::set<int32_t> sa = as_set(a->experts);
            if (std::any_of(b->experts.begin(), b->experts.end(), [&](int32_t e) { return sa.count(e) > 0; })) ++overlap;
        }
        if (rep.pairs > 0) {
            rep.same_first = static_cast<double>(first) / rep.pairs;
            rep.overlap = static_cast<double>(overlap) / rep.pairs;
        }
        out.push_back(rep);
    }
    return out;
}

double random_same_first(int experts) { return experts > 0 ? 1.0 / experts : 0.0; }

double random_overlap(int experts, int k) {
    if (experts <= 0 || k <= 0) return 0.0;
    if (2 * k > experts) return 1.0;
    // C(E-k, k) / C(E, k) = prod_{i=0}^{k-1} (E-k-i) / (E-i): both sets drawn uniformly, disjoint.
    double disjoint = 1.0;
    for (int i = 0; i < k; ++i) disjoint *= static_cast<double>(experts - k - i) / (experts - i);
    return 1.0 - disjoint;
}

std::vector<Predictability> next_layer_predictability(const std::vector<TokenTrace>& traces) {
    std::vector<Predictability> out;
    const std::vector<int> layers = routed_layers(traces);
    for (size_t li = 0; li + 1 < layers.size(); ++li) {
        Predictability p;
        p.layer = layers[li];
        p.next_layer = layers[li + 1];
        std::map<int, std::map<int, int>> successors;  // first choice here -> first choice next -> count
        std::map<int, int> next_counts, here_counts;
        std::vector<std::pair<int, const LayerRouting*>> pairs;
        for (const TokenTrace& t : traces) {
            const LayerRouting* a = t.routing_at(p.layer);
            const LayerRouting* b = t.routing_at(p.next_layer);
            if (a == nullptr || b == nullptr || a->experts.empty() || b->experts.empty()) continue;
            ++p.tokens;
            ++successors[a->experts.front()][b->experts.front()];
            ++next_counts[b->experts.front()];
            ++here_counts[a->experts.front()];
            pairs.push_back({a->experts.front(), b});
        }
        if (p.tokens == 0) {
            out.push_back(p);
            continue;
        }
        std::map<int, int> guess;
        for (const auto& [e, next] : successors)
            guess[e] = std::max_element(next.begin(), next.end(), [](const auto& x, const auto& y) {
                           return x.second != y.second ? x.second < y.second : x.first > y.first;
                       })->first;
        int right = 0, hit = 0;
        for (const auto& [e, b] : pairs) {
            const int g = guess[e];
            right += b->experts.front() == g ? 1 : 0;
            hit += std::find(b->experts.begin(), b->experts.end(), g) != b->experts.end() ? 1 : 0;
        }
        p.accuracy = static_cast<double>(right) / p.tokens;
        p.top_k_hit = static_cast<double>(hit) / p.tokens;
        int most = 0;
        for (const auto& [_, c] : next_counts) most = std::max(most, c);
        p.baseline = static_cast<double>(most) / p.tokens;
        // I(A;B) = H(B) - H(B|A).
        const double h_next = entropy_bits(next_counts, p.tokens);
        double h_cond = 0;
        for (const auto& [e, next] : successors) h_cond += static_cast<double>(here_counts[e]) / p.tokens * entropy_bits(next, here_counts[e]);
        p.mutual_information = std::max(0.0, h_next - h_cond);
        p.normalized_mi = h_next > 0 ? p.mutual_information / h_next : 0.0;
        out.push_back(p);
    }
    return out;
}

RoutingComparison compare_routing(const std::vector<TokenTrace>& a, const std::vector<TokenTrace>& b, int experts) {
    RoutingComparison out;
    const size_t n = std::min(a.size(), b.size());
    out.same_tokens = n > 0;
    for (size_t i = 0; i < n && out.same_tokens; ++i) out.same_tokens = a[i].token == b[i].token;
    out.same_tokens = out.same_tokens && a.size() == b.size();
    const std::vector<int> layers = routed_layers(a);
    if (out.same_tokens) {
        out.positions = static_cast<int>(n);
        for (int layer : layers) {
            LayerAgreement g;
            g.layer = layer;
            int first = 0, same = 0;
            double jaccard = 0;
            for (size_t i = 0; i < n; ++i) {
                const LayerRouting* ra = a[i].routing_at(layer);
                const LayerRouting* rb = b[i].routing_at(layer);
                if (ra == nullptr || rb == nullptr || ra->experts.empty() || rb->experts.empty()) continue;
                ++g.positions;
                first += ra->experts.front() == rb->experts.front() ? 1 : 0;
                const std::set<int32_t> sa = as_set(ra->experts), sb = as_set(rb->experts);
                same += sa == sb ? 1 : 0;
                std::vector<int32_t> both, either;
                std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(both));
                std::set_union(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(either));
                jaccard += either.empty() ? 1.0 : static_cast<double>(both.size()) / static_cast<double>(either.size());
            }
            if (g.positions > 0) {
                g.same_first = static_cast<double>(first) / g.positions;
                g.same_set = static_cast<double>(same) / g.positions;
                g.jaccard = jaccard / g.positions;
            }
            out.layers.push_back(g);
        }
        for (size_t i = 0; i < n; ++i)
            for (int layer : layers) {
                const LayerRouting* ra = a[i].routing_at(layer);
                const LayerRouting* rb = b[i].routing_at(layer);
                if (ra == nullptr || rb == nullptr || as_set(ra->experts) == as_set(rb->experts)) continue;
                out.divergent.push_back({a[i].position, a[i].token, a[i].text, layer, ra->experts, rb->experts});
                break;
            }
    }
    // Usage: shares of the expert selections per layer, in each run.
    auto shares = [experts](const std::vector<TokenTrace>& run, int layer) {
        std::vector<double> s(static_cast<size_t>(std::max(experts, 0)), 0.0);
        double total = 0;
        for (const TokenTrace& t : run)
            if (const LayerRouting* r = t.routing_at(layer))
                for (int32_t e : r->experts)
                    if (in_range(e, experts)) {
                        s[static_cast<size_t>(e)] += 1;
                        total += 1;
                    }
        if (total > 0)
            for (double& x : s) x /= total;
        return s;
    };
    for (int layer : layers) {
        UsageDivergence u;
        u.layer = layer;
        u.shares_a = shares(a, layer);
        u.shares_b = shares(b, layer);
        double js = 0;
        for (size_t e = 0; e < u.shares_a.size(); ++e) {
            const double p = u.shares_a[e], q = u.shares_b[e], m = 0.5 * (p + q);
            if (p > 0) js += 0.5 * p * std::log2(p / m);
            if (q > 0) js += 0.5 * q * std::log2(q / m);
        }
        u.js_bits = std::max(0.0, js);
        out.usage.push_back(std::move(u));
    }
    return out;
}

}  // namespace colibri::studio
