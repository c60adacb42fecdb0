// colibri cache-sim: replays a recorded routing trace (colibri route --json) through the expert-cache policies
// of engine/cache/expert_slots.h and Belady's offline optimum, per layer, for a range of slot counts per layer.
// A slot holds one routed expert; each MoE layer has its own slots, as in the budgeted engine.
#pragma once
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cache/expert_slots.h"
#include "engine/base/status.h"
#include "engine/core/open_model.h"

namespace colibri {
class Model;
}

namespace colibri::tools {

// One layer's expert ids per position, stored flat: 4 bytes per id while every position has as many (a trace's
// choices always do), where a vector per position took 56 bytes or more (a 100 MB trace of top-1 choices needed
// 4 GB as a parsed document of such vectors). Positions of different sizes add an end offset each. Reads like a
// vector of id spans.
class ChoiceList {
public:
    ChoiceList() = default;
    ChoiceList(const std::vector<std::vector<uint32_t>>& per_position) {
        for (const auto& ids : per_position) push_back(ids);
    }

    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    std::span<const uint32_t> operator[](size_t p) const {
        if (!ragged_) return {ids_.data() + p * k_, k_};
        const size_t begin = p == 0 ? 0 : ends_[p - 1];
        return {ids_.data() + begin, ends_[p] - begin};
    }
    void push_back(std::span<const uint32_t> ids) { emplace_back(ids.begin(), ids.end()); }
    template <typename It>
    void emplace_back(It first, It last) {
        for (; first != last; ++first) ids_.push_back(static_cast<uint32_t>(*first));
        end_position();
    }
    // Building a position id by id: push_id adds to the open position, end_position closes it.
    void push_id(uint32_t id) { ids_.push_back(id); }
    void end_position();
    size_t open_ids() const { return ids_.size() - closed_ids(); }
    std::span<const uint32_t> open_position() const { return {ids_.data() + closed_ids(), open_ids()}; }
    bool operator==(const ChoiceList& other) const;

    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = std::span<const uint32_t>;
        using difference_type = std::ptrdiff_t;
        using pointer = void;
        using reference = value_type;
        iterator() = default;
        iterator(const ChoiceList* list, size_t p) : list_(list), p_(p) {}
        value_type operator*() const { return (*list_)[p_]; }
        iterator& operator++() { return ++p_, *this; }
        iterator operator++(int) { iterator old = *this; ++p_; return old; }
        bool operator==(const iterator& o) const { return p_ == o.p_; }

    private:
        const ChoiceList* list_ = nullptr;
        size_t p_ = 0;
    };
    iterator begin() const { return {this, 0}; }
    iterator end() const { return {this, size()}; }

private:
    size_t closed_ids() const { return ragged_ ? (ends_.empty() ? 0 : ends_.back()) : count_ * k_; }
    std::vector<uint32_t> ids_;
    size_t count_ = 0;
    size_t k_ = 0;               // ids per position while they are all alike
    bool ragged_ = false;        // else: position p's ids are ids_[ends_[p - 1], ends_[p])
    std::vector<size_t> ends_;
};

// Per MoE layer, per position: the experts the router chose.
struct RoutingTrace {
    uint32_t n_experts = 0;  // the trace's "n_experts", else the largest id seen + 1
    uint32_t top_k = 0;      // experts per token (the same at every layer and position)
    std::vector<uint32_t> layers;     // layer ids, in the trace's order
    std::vector<ChoiceList> choices;  // [layer index][position]: top_k ids
    // route --predict: the experts predicted for each position at the layer before ([layer index][position];
    // empty for a layer without predictions).
    std::vector<ChoiceList> predicted;
    bool has_predictions() const;
};

inline constexpr uint64_t kMaxTraceBytes = uint64_t(1) << 30;

// Reads route's JSON: {"n_experts"?: N, "layers": [{"layer": L, "experts": [[ids], ...], "predicted"?: [[ids], ...]},
// ...]}. Every position of every layer must choose top_k distinct ids in [0, n_experts); so must every
// prediction, one per position where a layer has them.
Result<RoutingTrace> parse_routing_trace(std::string_view text);
// Errors name the file; what is not a regular file (a FIFO, a device) is refused without waiting on it.
Result<RoutingTrace> read_routing_trace(const std::string& path);

// Whether a trace was recorded on `model` (or one of its shape): the same experts per layer and per token, and
// only layers that are the model's MoE layers. The error says what differs.
Status trace_fits_model(const RoutingTrace& trace, const Model& model);
// The pinned policy's hot experts for `model` (hot_experts below) from a trace file that fits it.
Result<std::vector<std::vector<uint32_t>>> read_hot_experts(const std::string& path, const Model& model);
// read_hot_experts as open_model's hot set (engine/core/open_model.h); its errors begin with `prefix`.
HotExpertSource hot_experts_from_trace(const std::string& path, const std::string& prefix = {});

struct LayerHits {
    uint32_t layer = 0;
    uint64_t hits = 0;
    uint64_t accesses = 0;
    uint64_t prefetched = 0;  // with prediction: experts loaded ahead of their token
};

struct ReplayResult {
    std::string policy;  // lru, lfru, pinned, belady; lru+prediction
    uint32_t slot_count = 0;  // per layer
    std::vector<LayerHits> layers;
    uint64_t hits = 0, accesses = 0, prefetched = 0;
    double rate() const { return accesses ? double(hits) / double(accesses) : 0.0; }
};

// Per layer, the hot set the Pinned policy keeps at `slots` slots: the slots - top_k experts `source` used most
// at that layer (no pins for a layer the source lacks). The other top_k slots serve everything else.
std::vector<std::vector<uint32_t>> pinned_sets(const RoutingTrace& trace, const RoutingTrace& source, uint32_t n_slots);

// Per model layer (index = layer id, up to the largest in the trace): how often the trace chose each expert (empty for
// a layer the trace lacks); what expert placement balances (engine/distributed/expert_placement.h).
std::vector<std::vector<uint64_t>> expert_heat(const RoutingTrace& trace);

// Per model layer (index = layer id, up to the largest in the trace): its experts by use in the trace, most
// used first (ties: lower id), unused ones left out; what the engine's pinned policy reads.
std::vector<std::vector<uint32_t>> hot_experts(const RoutingTrace& trace);

// Each token's choice at a layer is one group (engine/cache/expert_slots.h); the cache starts empty. With prediction
// (a trace from route --predict), before each token's choice at a layer its predicted experts are loaded as a
// group of their own, as the engine's --cache-prefetch does; loads of predicted experts are not hits or misses.
ReplayResult replay(const RoutingTrace& trace, CachePolicy policy, uint32_t n_slots, const RoutingTrace& pin_source,
                    bool with_prediction = false);

// Per layer with predictions: of the experts its tokens chose, the share the prediction named.
struct PredictionAccuracy {
    uint32_t layer = 0;
    uint64_t right = 0, chosen = 0;
};
std::vector<PredictionAccuracy> prediction_accuracy(const RoutingTrace& trace);
// Belady's MIN: on a miss evict the resident expert used again furthest in the future (optimal for demand
// fetching; the hits no online policy can beat).
ReplayResult replay_belady(const RoutingTrace& trace, uint32_t n_slots);

// "A..B" (every count from A to B), "N", or "A,B,C"; each between top_k and n_experts.
Result<std::vector<uint32_t>> parse_slot_counts(std::string_view text, const RoutingTrace& trace);
// 12.5 %, 25 %, 50 % and 75 % of the experts (at least top_k), distinct, ascending.
std::vector<uint32_t> default_slot_counts(const RoutingTrace& trace);

struct CacheSimReport {
    uint32_t n_experts = 0, top_k = 0, positions = 0;
    size_t layers = 0;
    std::string pin_source;  // "in-sample" or the path of the trace the hot set was learned from
    std::vector<ReplayResult> runs;  // per slot count: lru, lfru, pinned, belady (and lru+prediction with predictions)
    size_t runs_per_count = 4;
    std::vector<PredictionAccuracy> prediction;  // empty without predictions
};
CacheSimReport cache_sim(const RoutingTrace& trace, const std::vector<uint32_t>& slot_counts,
                         const RoutingTrace& pin_source, std::string pin_source_name);
nlohmann::json cache_sim_json(const CacheSimReport& report);
std::string cache_sim_text(const CacheSimReport& report);

}  // namespace colibri::tools
