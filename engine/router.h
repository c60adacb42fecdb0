// The MoE router's decision for one token: from the router logits over all experts to the selected experts
// and their weights. Two variants:
// - Exact (the default): float softmax over all experts, top-k, the family's renormalisation — what
//   transformers computes.
// - Lut: the integer router of the design. Logits are quantised relative to their maximum in steps of
//   1/kLutStepsPerNat, exp comes from a 256-entry table of Q16 fixed-point values, top-k and the weights are
//   integer arithmetic (Q16), converted to float only for the expert sum. Selection ties go to the lower
//   expert index in both variants.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace colibri {

enum class RouterKind : uint32_t { Exact = 0, Lut = 1 };

// In place: v[i] = exp(v[i] - max) / sum. The exact router and attention both use this one, so their
// rounding is the same everywhere.
void softmax(float* v, size_t n);

// How a model routes, decided once at load from its family and hyper-parameters (Model::rules()), so that the
// forward pass, the router tools and the traces read fields instead of re-deriving family rules.
struct RoutingRules {
    bool renormalise = false;  // divide the selected experts' weights by their sum
};

// "exact" or "lut"; nullopt for anything else.
std::optional<RouterKind> parse_router_kind(std::string_view name);
const char* router_kind_name(RouterKind kind);

namespace lut_router {
inline constexpr uint32_t kTableSize = 256;
inline constexpr uint32_t kStepsPerNat = 32;  // 256 steps cover 8 nats: exp(-8) ≈ 3e-4 of the top expert
inline constexpr uint32_t kOneQ16 = 1u << 16;
// table()[q] = round(2^16 · exp(-q / kStepsPerNat)); a logit 256 or more steps below the maximum weighs 0.
const uint32_t* table();
}  // namespace lut_router

// Routes one token. logits: n_experts floats. Writes probs (n_experts: the distribution the selection was
// made from), selected (k expert ids, descending weight) and weights (k). renormalise: divide the top-k
// weights by their sum (Mixtral always; qwen2_moe/olmoe with norm_topk_prob). Allocates nothing.
void route_token(RouterKind kind, const float* logits, uint32_t n_experts, uint32_t k, bool renormalise,
                 float* probs, int32_t* selected, float* weights);

}  // namespace colibri
