// Top-k agreement of a router variant with the exact router over a prompt (`colibri route --compare`), in two
// ways: on the same router logits (the exact run's, so only the routing decision differs) and end to end (a
// second run that uses the variant throughout, so its hidden states drift with its weights).
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <vector>

#include "engine/core/model.h"
#include "engine/core/router.h"
#include "engine/base/status.h"
#include "engine/core/thread_pool.h"

namespace colibri::tools {

struct RouterAgreementCounts {
    uint64_t decisions = 0;    // (token, layer) pairs
    uint64_t same_set = 0;     // the same k experts
    uint64_t same_order = 0;   // the same k experts in the same order
    double max_weight_diff = 0;  // max |Δ weight| of an expert, over the decisions with the same set
    double set_rate() const { return decisions ? double(same_set) / double(decisions) : 1.0; }
    double order_rate() const { return decisions ? double(same_order) / double(decisions) : 1.0; }
    void add(std::span<const int32_t> want_experts, std::span<const float> want_weights, std::span<const int32_t> got_experts,
             std::span<const float> got_weights);
    void merge(const RouterAgreementCounts& o);
};

struct RouterAgreement {
    RouterKind kind = RouterKind::Lut;
    size_t tokens = 0;
    std::vector<uint32_t> layers;  // MoE layer indices
    std::vector<RouterAgreementCounts> same_logits, end_to_end;  // per entry of layers
    RouterAgreementCounts same_logits_total() const;
    RouterAgreementCounts end_to_end_total() const;
};

Result<RouterAgreement> compare_routers(const Model& model, ThreadPool& pool, std::span<const int32_t> tokens, RouterKind kind);
nlohmann::json router_agreement_json(const RouterAgreement& a);

}  // namespace colibri::tools
