#include "router.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace colibri {

std::optional<RouterKind> parse_router_kind(std::string_view name) {
    if (name == "exact") return RouterKind::Exact;
    if (name == "lut") return RouterKind::Lut;
    return std::nullopt;
}

const char* router_kind_name(RouterKind kind) { return kind == RouterKind::Lut ? "lut" : "exact"; }

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

void route_token(RouterKind kind, const float* logits, uint32_t n_experts, uint32_t k, bool renormalise,
                 float* probs, int32_t* selected, float* weights) {
    if (kind == RouterKind::Lut)
        route_lut(logits, n_experts, k, renormalise, probs, selected, weights);
    else
        route_exact(logits, n_experts, k, renormalise, probs, selected, weights);
}

}  // namespace colibri
