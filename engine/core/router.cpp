#include "engine/core/router.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace colibri {

std::optional<RouterKind> parse_router_kind(std::string_view name) {
    if (name == "exact") return RouterKind::Exact;
    if (name == "lut") return RouterKind::Lut;
    return std::nullopt;
}

const char* router_kind_name(RouterKind kind) { return kind == RouterKind::Lut ? "lut" : "exact"; }

bool lut_router_supports(const RoutingRules& r) {
    return r.scoring == RouterScoring::Softmax && !r.selection_bias && r.n_group <= 1;
}

Status check_router_supports(const RoutingRules& rules, RouterKind kind) {
    if (kind == RouterKind::Lut && !lut_router_supports(rules))
        return error(std::string("the lut router implements softmax routing only; this model's router is ") +
                     router_scoring_name(rules.scoring));
    return Status::ok();
}

const char* router_scoring_name(RouterScoring s) {
    switch (s) {
        case RouterScoring::Softmax: return "softmax";
        case RouterScoring::Sigmoid: return "sigmoid";
        case RouterScoring::SoftmaxSelected: return "softmax_selected";
    }
    return "unknown";
}

namespace lut_router {
const uint32_t* table() {
    static const std::array<uint32_t, kTableSize> t = [] {
        std::array<uint32_t, kTableSize> v{};
        for (uint32_t q = 0; q < kTableSize; ++q)
            v[q] = static_cast<uint32_t>(std::lround(double(kOneQ16) * std::exp(-double(q) / kStepsPerNat)));
        return v;
    }();
    return t.data();
}
}  // namespace lut_router

void softmax(float* v, size_t n) {
    float mx = v[0];
    for (size_t i = 1; i < n; ++i) mx = std::max(mx, v[i]);
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        v[i] = std::exp(v[i] - mx);
        sum += v[i];
    }
    for (size_t i = 0; i < n; ++i) v[i] /= sum;
}

namespace {

// Top-k of score by descending value; ties go to the lower index, as a stable selection.
template <typename Score>
void select_top_k(const Score* score, uint32_t n, uint32_t k, int32_t* selected) {
    for (uint32_t j = 0; j < k; ++j) {
        int32_t best = -1;
        for (uint32_t e = 0; e < n; ++e) {
            bool taken = false;
            for (uint32_t s = 0; s < j; ++s) taken |= selected[s] == static_cast<int32_t>(e);
            if (!taken && (best < 0 || score[e] > score[best])) best = static_cast<int32_t>(e);
        }
        selected[j] = best;
    }
}

void route_exact(const float* logits, uint32_t n, uint32_t k, bool renormalise, float* probs, int32_t* selected,
                 float* weights) {
    std::copy(logits, logits + n, probs);
    softmax(probs, n);
    select_top_k(probs, n, k, selected);
    for (uint32_t j = 0; j < k; ++j) weights[j] = probs[selected[j]];
    if (renormalise) {
        float sum = 0.0f;
        for (uint32_t j = 0; j < k; ++j) sum += weights[j];
        for (uint32_t j = 0; j < k; ++j) weights[j] /= sum;
    }
}

// Q16 fixed-point quotient num / den, rounded to nearest.
uint32_t q16_div(uint64_t num, uint64_t den) {
    return static_cast<uint32_t>(((num << 16) + den / 2) / den);
}

void route_lut(const float* logits, uint32_t n, uint32_t k, bool renormalise, float* probs, int32_t* selected,
               float* weights) {
    using namespace lut_router;
    const uint32_t* exp_table = table();
    float mx = logits[0];
    for (uint32_t e = 1; e < n; ++e) mx = std::max(mx, logits[e]);
    // probs doubles as the integer scratch: the unnormalised Q16 exp of each expert, stored as float (exact
    // below 2^24).
    uint64_t total = 0;
    for (uint32_t e = 0; e < n; ++e) {
        const float steps = (mx - logits[e]) * float(kStepsPerNat) + 0.5f;
        // NaN fails the comparison too: such an expert weighs nothing.
        const uint32_t v = steps >= 0.0f && steps < float(kTableSize) ? exp_table[static_cast<uint32_t>(steps)] : 0;
        probs[e] = float(v);
        total += v;
    }
    select_top_k(probs, n, k, selected);
    uint64_t selected_total = 0;
    for (uint32_t j = 0; j < k; ++j) selected_total += static_cast<uint64_t>(probs[selected[j]]);
    const uint64_t den = renormalise ? selected_total : total;
    for (uint32_t j = 0; j < k; ++j) {
        const uint64_t v = static_cast<uint64_t>(probs[selected[j]]);
        weights[j] = den ? float(q16_div(v, den)) / float(kOneQ16) : 0.0f;
    }
    for (uint32_t e = 0; e < n; ++e) probs[e] = total ? float(q16_div(static_cast<uint64_t>(probs[e]), total)) / float(kOneQ16) : 0.0f;
}

}  // namespace

namespace {

// Selection and weights for the exact router with any scoring (see router.h), as transformers computes them.
void route_exact_rules(const RoutingRules& rules, const float* logits, const float* bias, uint32_t n, uint32_t k,
                       const RouteOutput& out) {
    float* scores = out.scores;
    switch (rules.scoring) {
        case RouterScoring::Softmax:
            std::copy(logits, logits + n, scores);
            softmax(scores, n);
            break;
        case RouterScoring::Sigmoid:
            for (uint32_t e = 0; e < n; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
            break;
        case RouterScoring::SoftmaxSelected: std::copy(logits, logits + n, scores); break;
    }
    // The values selection compares: the scores, plus the bias where the family has one. With groups, the
    // experts outside the topk_group best groups count as 0.0 (not −∞: transformers' masked_fill(…, 0.0)).
    // Selection goes through out.weights as scratch for the group scores, and out.selection per expert is
    // written after the choice.
    constexpr uint32_t kMaxExperts = 4096;  // the formats' limit (tools/convert_hf)
    float choice[kMaxExperts];
    const uint32_t m = std::min(n, kMaxExperts);
    for (uint32_t e = 0; e < m; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
    if (rules.n_group > 1 && m % rules.n_group == 0) {
        const uint32_t per = m / rules.n_group;
        float group_score[256];
        const uint32_t groups = std::min<uint32_t>(rules.n_group, 256);
        for (uint32_t g = 0; g < groups; ++g) {
            // The sum of the group's two best choice values (top-2 then sum, as transformers).
            int32_t top2[2];
            select_top_k(choice + g * per, per, std::min<uint32_t>(2, per), top2);
            group_score[g] = choice[g * per + top2[0]] + (per > 1 ? choice[g * per + top2[1]] : 0.0f);
        }
        int32_t kept[256];
        const uint32_t keep = std::min(rules.topk_group, groups);
        select_top_k(group_score, groups, keep, kept);
        std::sort(kept, kept + keep);
        if (out.groups)
            for (uint32_t j = 0; j < keep; ++j) out.groups[j] = static_cast<uint32_t>(kept[j]);
        for (uint32_t g = 0; g < groups; ++g) {
            if (std::find(kept, kept + keep, static_cast<int32_t>(g)) != kept + keep) continue;
            for (uint32_t e = g * per; e < (g + 1) * per; ++e) choice[e] = 0.0f;
        }
    }
    select_top_k(choice, m, k, out.selected);
    for (uint32_t j = 0; j < k; ++j) {
        out.weights[j] = scores[out.selected[j]];
        out.selection[j] = choice[out.selected[j]];
    }
    if (rules.scoring == RouterScoring::SoftmaxSelected) {
        softmax(out.weights, k);  // over the selected logits only
    } else if (rules.renormalise) {
        float sum = 0.0f;
        for (uint32_t j = 0; j < k; ++j) sum += out.weights[j];
        if (rules.scoring == RouterScoring::Sigmoid) sum += 1e-20f;
        for (uint32_t j = 0; j < k; ++j) out.weights[j] /= sum;
    }
    if (rules.scaling != 1.0f)
        for (uint32_t j = 0; j < k; ++j) out.weights[j] *= rules.scaling;
}

// Selected experts by descending weight, ties by id (the order transformers' references list them in); the
// selection values move with their experts.
void order_by_weight(uint32_t k, const RouteOutput& out) {
    for (uint32_t a = 1; a < k; ++a)
        for (uint32_t b = a; b > 0; --b) {
            const bool before = out.weights[b] > out.weights[b - 1] ||
                                (out.weights[b] == out.weights[b - 1] && out.selected[b] < out.selected[b - 1]);
            if (!before) break;
            std::swap(out.weights[b], out.weights[b - 1]);
            std::swap(out.selected[b], out.selected[b - 1]);
            std::swap(out.selection[b], out.selection[b - 1]);
        }
}

}  // namespace

void route_token(RouterKind kind, const RoutingRules& rules, const float* logits, const float* bias, uint32_t n_experts,
                 uint32_t k, const RouteOutput& out) {
    if (kind == RouterKind::Lut && lut_router_supports(rules)) {
        route_lut(logits, n_experts, k, rules.renormalise, out.scores, out.selected, out.weights);
        for (uint32_t j = 0; j < k; ++j) out.selection[j] = out.scores[out.selected[j]];
        if (rules.scaling != 1.0f)
            for (uint32_t j = 0; j < k; ++j) out.weights[j] *= rules.scaling;
    } else {
        route_exact_rules(rules, logits, rules.selection_bias ? bias : nullptr, n_experts, k, out);
    }
    order_by_weight(k, out);
}

void route_token(RouterKind kind, const float* logits, uint32_t n_experts, uint32_t k, bool renormalise,
                 float* probs, int32_t* selected, float* weights) {
    if (kind == RouterKind::Lut)
        route_lut(logits, n_experts, k, renormalise, probs, selected, weights);
    else
        route_exact(logits, n_experts, k, renormalise, probs, selected, weights);
}

}  // namespace colibri
