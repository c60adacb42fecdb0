// Which ranks hold each routed expert of each MoE layer (engine/distributed/communicator.h's ranks), and which
// of a chosen expert's rows each holder computes. An expert held by several ranks (a replicated hot expert) has its
// tokens split among them in rank order; every rank derives the same split from the same routing.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/status.h"

namespace colibri {

// What a placement must fit: the decoder layers, which of them are MoE layers, and their routed experts.
struct PlacementShape {
    uint32_t n_experts = 0;
    std::vector<bool> moe;  // per decoder layer
};

class ExpertPlacement {
public:
    static constexpr uint32_t kMaxRanks = 64;  // holders are a 64-bit set per expert

    // Expert e of every MoE layer on rank e % ranks.
    static ExpertPlacement round_robin(uint32_t ranks, const PlacementShape& shape);
    // From heat (per decoder layer, per expert: how often the router chose it; empty for a layer without data):
    // per layer the `replicate` hottest experts on every rank, then the others, hottest first, each on the rank with
    // the least expected load so far (a replicated expert's load split evenly among the ranks).
    static ExpertPlacement balanced(uint32_t ranks, const PlacementShape& shape, const std::vector<std::vector<uint64_t>>& heat,
                                    uint32_t replicate);
    // Reads --placement's JSON: {"ranks": N, "layers": {"<layer>": [holder of expert 0, ...]}}, a holder being a rank
    // or an array of ranks (a replicated expert). Layers left out are dealt round-robin. Refused, naming what is wrong:
    // a layer the model lacks or that is not an MoE layer, a list of another length than the layer's experts, a rank
    // outside [0, ranks), an expert without a holder, `ranks` other than the run's.
    static Result<ExpertPlacement> parse(std::string_view json, uint32_t ranks, const PlacementShape& shape);
    static Result<ExpertPlacement> read(const std::string& path, uint32_t ranks, const PlacementShape& shape);
    // The JSON parse() reads (every MoE layer listed).
    std::string to_json() const;

    uint32_t ranks() const { return ranks_; }
    uint32_t n_experts() const { return n_experts_; }
    bool is_moe(uint32_t layer) const { return layer < moe_.size() && moe_[layer]; }
    // Whether `rank` holds expert e of `layer` (may read its weights).
    bool holds(uint32_t layer, uint32_t expert, uint32_t rank) const { return (holders(layer, expert) >> rank) & 1u; }
    uint64_t holders(uint32_t layer, uint32_t expert) const { return holders_[size_t(layer) * n_experts_ + expert]; }
    // The rows [begin, begin + count) of `rows` routed to expert e that `rank` computes (count 0 when it computes none).
    struct Share {
        uint32_t begin = 0, count = 0;
    };
    Share share(uint32_t layer, uint32_t expert, uint32_t rank, uint32_t rows) const;
    // Each rank's expected share of the expert work, from heat as balanced() takes it (all 1 when heat is empty).
    std::vector<double> expected_shares(const std::vector<std::vector<uint64_t>>& heat) const;

private:
    uint32_t ranks_ = 1, n_experts_ = 0;
    std::vector<bool> moe_;
    std::vector<uint64_t> holders_;  // [layer][expert]: bit r set when rank r holds it
};

}  // namespace colibri
