#include "engine/distributed/expert_placement.h"

#include <algorithm>
#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "engine/base/json_depth.h"

namespace colibri {

namespace {

ExpertPlacement::Share split(uint64_t holders, uint32_t rank, uint32_t rows) {
    if (!((holders >> rank) & 1u)) return {};
    const auto m = static_cast<uint32_t>(std::popcount(holders));
    const auto j = static_cast<uint32_t>(std::popcount(holders & ((uint64_t(1) << rank) - 1)));  // holders before it
    const uint32_t begin = uint32_t(uint64_t(rows) * j / m), end = uint32_t(uint64_t(rows) * (j + 1) / m);
    return {begin, end - begin};
}

}  // namespace

ExpertPlacement ExpertPlacement::round_robin(uint32_t ranks, const PlacementShape& shape) {
    ExpertPlacement p;
    p.ranks_ = ranks;
    p.n_experts_ = shape.n_experts;
    p.moe_ = shape.moe;
    p.holders_.assign(shape.moe.size() * shape.n_experts, 0);
    for (size_t l = 0; l < shape.moe.size(); ++l)
        for (uint32_t e = 0; e < shape.n_experts; ++e) p.holders_[l * shape.n_experts + e] = uint64_t(1) << (e % ranks);
    return p;
}

ExpertPlacement ExpertPlacement::balanced(uint32_t ranks, const PlacementShape& shape, const std::vector<std::vector<uint64_t>>& heat,
                                          uint32_t replicate) {
    ExpertPlacement p = round_robin(ranks, shape);
    const uint64_t all = ranks >= 64 ? ~uint64_t(0) : (uint64_t(1) << ranks) - 1;
    for (size_t l = 0; l < shape.moe.size(); ++l) {
        if (!shape.moe[l] || l >= heat.size() || heat[l].size() != shape.n_experts) continue;
        const std::vector<uint64_t>& h = heat[l];
        std::vector<uint32_t> order(shape.n_experts);
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return h[a] > h[b]; });
        std::vector<double> load(ranks, 0.0);
        std::vector<uint64_t> greedy(shape.n_experts);
        for (uint32_t i = 0; i < order.size(); ++i) {
            const uint32_t e = order[i];
            if (i < replicate && ranks > 1) {
                greedy[e] = all;
                for (double& x : load) x += double(h[e]) / ranks;
                continue;
            }
            const auto least = static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
            greedy[e] = uint64_t(1) << least;
            load[least] += double(h[e]);
        }
        // Each layer waits for its slowest rank: keep round-robin where it happens to spread this layer better.
        std::vector<double> dealt(ranks, 0.0);
        for (uint32_t e = 0; e < shape.n_experts; ++e) dealt[e % ranks] += double(h[e]);
        if (*std::max_element(dealt.begin(), dealt.end()) < *std::max_element(load.begin(), load.end())) continue;
        std::copy(greedy.begin(), greedy.end(), p.holders_.begin() + std::ptrdiff_t(l * shape.n_experts));
    }
    return p;
}

Result<ExpertPlacement> ExpertPlacement::parse(std::string_view text, uint32_t ranks, const PlacementShape& shape) {
    using nlohmann::json;
    if (ranks == 0 || ranks > kMaxRanks) return error("at most " + std::to_string(kMaxRanks) + " ranks, not " + std::to_string(ranks));
    if (json_too_deep(text)) return error("nested too deeply");
    const json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return error("not a JSON object");
    if (!j.contains("ranks") || !j["ranks"].is_number_unsigned()) return error("\"ranks\" must be the number of ranks");
    if (j["ranks"].get<uint64_t>() != ranks)
        return error("written for " + std::to_string(j["ranks"].get<uint64_t>()) + " ranks, this run has " + std::to_string(ranks));
    ExpertPlacement p = round_robin(ranks, shape);
    if (!j.contains("layers")) return p;
    if (!j["layers"].is_object()) return error("\"layers\" must be an object of layer -> experts' ranks");
    for (const auto& [key, experts] : j["layers"].items()) {
        size_t used = 0;
        unsigned long layer = 0;
        try {
            layer = std::stoul(key, &used);
        } catch (...) {
            used = 0;
        }
        if (used == 0 || used != key.size()) return error("layer \"" + key + "\" is not a layer number");
        if (layer >= shape.moe.size())
            return error("layer " + key + ": the model has " + std::to_string(shape.moe.size()) + " layers");
        if (!shape.moe[layer]) return error("layer " + key + " is not an MoE layer");
        if (!experts.is_array()) return error("layer " + key + ": must be an array of each expert's rank");
        if (experts.size() != shape.n_experts)
            return error("layer " + key + " places " + std::to_string(experts.size()) + " experts, the model has " +
                         std::to_string(shape.n_experts));
        for (uint32_t e = 0; e < shape.n_experts; ++e) {
            const json& h = experts[e];
            uint64_t holders = 0;
            // The layer's name by value: clang 14 does not let a lambda capture a structured binding (C++20 does).
            const auto add = [&, name = key](const json& r) -> Status {
                if (!r.is_number_unsigned() || r.get<uint64_t>() >= ranks)
                    return error("layer " + name + " expert " + std::to_string(e) + ": " + r.dump() + " is not a rank in [0, " +
                                 std::to_string(ranks) + ")");
                holders |= uint64_t(1) << r.get<uint64_t>();
                return Status::ok();
            };
            if (h.is_array()) {
                for (const json& r : h) COLIBRI_TRY(add(r));
            } else {
                COLIBRI_TRY(add(h));
            }
            if (holders == 0) return error("layer " + key + " expert " + std::to_string(e) + " has no rank");
            p.holders_[layer * shape.n_experts + e] = holders;
        }
    }
    return p;
}

Result<ExpertPlacement> ExpertPlacement::read(const std::string& path, uint32_t ranks, const PlacementShape& shape) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(path + ": cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().size() > (size_t(64) << 20)) return error(path + ": larger than 64 MiB");
    auto p = parse(text.str(), ranks, shape);
    if (!p) return error(path + ": " + p.message());
    return p;
}

std::string ExpertPlacement::to_json() const {
    nlohmann::ordered_json layers = nlohmann::ordered_json::object();
    for (size_t l = 0; l < moe_.size(); ++l) {
        if (!moe_[l]) continue;
        nlohmann::ordered_json experts = nlohmann::ordered_json::array();
        for (uint32_t e = 0; e < n_experts_; ++e) {
            const uint64_t h = holders(uint32_t(l), e);
            if (std::popcount(h) == 1) {
                experts.push_back(std::countr_zero(h));
                continue;
            }
            nlohmann::ordered_json list = nlohmann::ordered_json::array();
            for (uint32_t r = 0; r < ranks_; ++r)
                if ((h >> r) & 1u) list.push_back(r);
            experts.push_back(list);
        }
        layers[std::to_string(l)] = experts;
    }
    return nlohmann::ordered_json{{"ranks", ranks_}, {"layers", layers}}.dump() + "\n";
}

ExpertPlacement::Share ExpertPlacement::share(uint32_t layer, uint32_t expert, uint32_t rank, uint32_t rows) const {
    return split(holders(layer, expert), rank, rows);
}

std::vector<double> ExpertPlacement::expected_shares(const std::vector<std::vector<uint64_t>>& heat) const {
    std::vector<double> load(ranks_, 0.0);
    for (size_t l = 0; l < moe_.size(); ++l) {
        if (!moe_[l]) continue;
        const bool measured = l < heat.size() && heat[l].size() == n_experts_;
        for (uint32_t e = 0; e < n_experts_; ++e) {
            const uint64_t h = holders(uint32_t(l), e);
            const double w = measured ? double(heat[l][e]) : 1.0;
            for (uint32_t r = 0; r < ranks_; ++r)
                if ((h >> r) & 1u) load[r] += w / std::popcount(h);
        }
    }
    const double total = std::accumulate(load.begin(), load.end(), 0.0);
    if (total > 0)
        for (double& x : load) x /= total;
    return load;
}

}  // namespace colibri
