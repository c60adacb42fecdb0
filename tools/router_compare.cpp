#include "router_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/session.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

struct Decision {
    std::vector<int32_t> experts;
    std::vector<float> weights;
};

// Decisions per (layer, position) of one run; with `also`, the decision `also` makes on the same logits.
struct DecisionLog : TraceObserver {
    const Model* model = nullptr;
    bool with_also = false;
    RouterKind also = RouterKind::Lut;
    std::map<std::pair<uint32_t, uint32_t>, Decision> taken, alternative;
    std::vector<float> probs, selection;

    void on_routing(const RoutingRecord& r) override {
        taken[{r.layer, r.position}] = Decision{{r.experts.begin(), r.experts.end()}, {r.weights.begin(), r.weights.end()}};
        if (!with_also) return;
        Decision d{std::vector<int32_t>(r.experts.size()), std::vector<float>(r.experts.size())};
        probs.resize(r.router_logits.size());
        selection.resize(r.experts.size());
        route_token(also, model->rules().routing, r.router_logits.data(), nullptr, static_cast<uint32_t>(r.router_logits.size()),
                    static_cast<uint32_t>(r.experts.size()), RouteOutput{probs.data(), d.experts.data(), d.weights.data(), selection.data(), nullptr});
        alternative[{r.layer, r.position}] = std::move(d);
    }
};

Status run(const Model& model, ThreadPool& pool, std::span<const int32_t> tokens, RouterKind kind, DecisionLog* log) {
    SessionOptions options = SessionOptions::from_environment();
    options.router = kind;
    Session s(model, pool, static_cast<uint32_t>(std::min<size_t>(tokens.size(), model.hparams().max_position)), options);
    s.set_observer(log);
    auto r = s.eval(tokens);
    return r ? Status::ok() : r.status();
}

json counts_json(const RouterAgreementCounts& c) {
    return json{{"decisions", c.decisions},     {"same_set", c.same_set},
                {"same_order", c.same_order},   {"set_agreement", c.set_rate()},
                {"order_agreement", c.order_rate()}, {"max_weight_diff", c.max_weight_diff}};
}

}  // namespace

void RouterAgreementCounts::add(std::span<const int32_t> we, std::span<const float> ww, std::span<const int32_t> ge,
                                std::span<const float> gw) {
    ++decisions;
    same_order += std::equal(we.begin(), we.end(), ge.begin(), ge.end());
    std::vector<int32_t> a(we.begin(), we.end()), b(ge.begin(), ge.end());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return;
    ++same_set;
    for (size_t j = 0; j < we.size(); ++j)
        for (size_t i = 0; i < ge.size(); ++i)
            if (ge[i] == we[j]) max_weight_diff = std::max(max_weight_diff, std::fabs(double(ww[j]) - double(gw[i])));
}

void RouterAgreementCounts::merge(const RouterAgreementCounts& o) {
    decisions += o.decisions;
    same_set += o.same_set;
    same_order += o.same_order;
    max_weight_diff = std::max(max_weight_diff, o.max_weight_diff);
}

RouterAgreementCounts RouterAgreement::same_logits_total() const {
    RouterAgreementCounts t;
    for (const auto& c : same_logits) t.merge(c);
    return t;
}

RouterAgreementCounts RouterAgreement::end_to_end_total() const {
    RouterAgreementCounts t;
    for (const auto& c : end_to_end) t.merge(c);
    return t;
}

Result<RouterAgreement> compare_routers(const Model& model, ThreadPool& pool, std::span<const int32_t> tokens, RouterKind kind) {
    if (tokens.empty()) return error("no tokens to route");
    if (!lut_router_supports(model.rules().routing))
        return error(std::string("router comparisons are for softmax routers; this model's router is ") +
                     router_scoring_name(model.rules().routing.scoring));
    DecisionLog exact, variant;
    exact.model = variant.model = &model;
    exact.with_also = true;
    exact.also = kind;
    if (Status s = run(model, pool, tokens, RouterKind::Exact, &exact); !s) return s;
    if (Status s = run(model, pool, tokens, kind, &variant); !s) return s;

    RouterAgreement a;
    a.kind = kind;
    a.tokens = tokens.size();
    std::map<uint32_t, size_t> slot;
    for (const auto& [key, want] : exact.taken) {
        auto [it, fresh] = slot.try_emplace(key.first, a.layers.size());
        if (fresh) {
            a.layers.push_back(key.first);
            a.same_logits.emplace_back();
            a.end_to_end.emplace_back();
        }
        const Decision& alt = exact.alternative.at(key);
        a.same_logits[it->second].add(want.experts, want.weights, alt.experts, alt.weights);
        const Decision& got = variant.taken.at(key);
        a.end_to_end[it->second].add(want.experts, want.weights, got.experts, got.weights);
    }
    return a;
}

json router_agreement_json(const RouterAgreement& a) {
    json layers = json::array();
    for (size_t i = 0; i < a.layers.size(); ++i)
        layers.push_back({{"layer", a.layers[i]}, {"same_logits", counts_json(a.same_logits[i])},
                          {"end_to_end", counts_json(a.end_to_end[i])}});
    return json{{"router", router_kind_name(a.kind)},
                {"baseline", "exact"},
                {"tokens", a.tokens},
                {"same_logits", counts_json(a.same_logits_total())},
                {"end_to_end", counts_json(a.end_to_end_total())},
                {"layers", layers}};
}

}  // namespace colibri::tools
