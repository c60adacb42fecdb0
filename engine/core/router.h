// The MoE router's decision for one token: from the router logits over all experts to the selected experts
// and the weights their outputs are multiplied by. What the family does is a RoutingRules value the model
// decides at load (engine/core/model.h); the router only follows it:
// - scoring: softmax over all experts (mixtral, qwen2_moe, olmoe, qwen3_moe), the logistic sigmoid of each
//   logit (deepseek_v3, glm4_moe: the scores are not a distribution), or the logits themselves with a softmax
//   over the selected ones only (gpt_oss);
// - selection: the top-k of the scores plus a per-expert selection bias (DeepSeek's e_score_correction_bias,
//   which steers the choice but never the weights), optionally only among the topk_group best of n_group
//   groups of consecutive experts (a group scores the sum of its two best biased scores);
// - weights: the selected scores, divided by their sum when renormalising, times the scaling factor
//   (routed_scaling_factor: a sigmoid router's weights sum to it, not to 1).
// Two variants: Exact (the default, what transformers computes) and Lut, the integer router of the design
// (logits quantised relative to their maximum in steps of 1/kStepsPerNat, exp from a table of Q16 values, top-k
// and weights in integer arithmetic), which implements softmax scoring only. Ties go to the lower expert index.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/base/status.h"

namespace colibri {

enum class RouterKind : uint32_t { Exact = 0, Lut = 1 };

// The numeric values are the .bin's HyperParams::router_scoring (docs/FORMAT.md).
enum class RouterScoring : uint8_t { Softmax = 0, Sigmoid = 1, SoftmaxSelected = 2 };
const char* router_scoring_name(RouterScoring s);  // "softmax", "sigmoid", "softmax_selected"

struct RoutingRules {
    RouterScoring scoring = RouterScoring::Softmax;
    bool renormalise = false;  // divide the selected scores by their sum (sigmoid: plus 1e-20, as transformers)
    float scaling = 1.0f;      // multiplies every weight (routed_scaling_factor)
    uint32_t n_group = 1;      // > 1: experts in n_group groups of consecutive ids, only topk_group of them eligible
    uint32_t topk_group = 1;
    bool selection_bias = false;  // a per-expert bias is added to the scores for selection only
};

// In place: v[i] = exp(v[i] - max) / sum. The exact router and attention both use this one, so their
// rounding is the same everywhere.
void softmax(float* v, size_t n);

// Whether the LUT router can route a model with these rules (softmax scoring, no selection bias, no groups).
bool lut_router_supports(const RoutingRules& rules);
// What a front end says instead of routing a model with a router that cannot: "the lut router implements softmax
// routing only; this model's router is <scoring>".
Status check_router_supports(const RoutingRules& rules, RouterKind kind);

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

// One token's routing, written by route_token (all arrays caller-owned; nothing is allocated).
struct RouteOutput {
    float* scores;       // n_experts: the scores selection starts from (softmax probabilities, sigmoids, logits)
    int32_t* selected;   // k expert ids, by descending weight (ties: lower id first)
    float* weights;      // k: what each selected expert's output is multiplied by
    float* selection;    // k: the value each was selected by (score + selection bias)
    uint32_t* groups;    // topk_group ids of the eligible groups, ascending; unused without groups (may be null)
};

// Routes one token. logits: n_experts floats; bias: n_experts selection biases (rules.selection_bias) or null.
// kind = Lut applies to softmax scoring only; other scorings are routed exactly.
void route_token(RouterKind kind, const RoutingRules& rules, const float* logits, const float* bias, uint32_t n_experts,
                 uint32_t k, const RouteOutput& out);

// The older interface, softmax scoring only (tests, the LUT comparison).
void route_token(RouterKind kind, const float* logits, uint32_t n_experts, uint32_t k, bool renormalise,
                 float* probs, int32_t* selected, float* weights);

}  // namespace colibri
