#include "cache_sim.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "engine/base/json_depth.h"
#include "engine/core/model.h"
#include "engine/file/mapped_file.h"
#include "engine/file/schema.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

// route's JSON read as a stream of events (nlohmann's SAX interface): no document is built, so a trace takes the
// memory of its ids (a 100 MB trace of top-1 choices took 4 GB as a document). Only "n_experts", "layers" and,
// per layer, "layer", "experts" and "predicted" are read; everything else is skipped.
class TraceReader final : public nlohmann::json_sax<json> {
public:
    RoutingTrace trace;
    std::string problem;  // the first, when a callback returned false

    // After the events: what needs the whole text ("n_experts" may follow "layers", as in route's output).
    Status finish() {
        if (!saw_layers_) return error("no \"layers\" array (write it with colibri route --json)");
        if (positions_ == 0) return error("the trace has no positions");
        if (!declared_) {
            trace.n_experts = max_id_ + 1;
            return Status::ok();
        }
        trace.n_experts = *declared_;
        for (size_t li = 0; li < trace.layers.size(); ++li)
            for (bool predicted : {false, true}) {
                const ChoiceList& list = predicted ? trace.predicted[li] : trace.choices[li];
                for (size_t p = 0; p < list.size(); ++p)
                    for (uint32_t e : list[p])
                        if (e >= *declared_)
                            return error(where(li, predicted, p) + ": expert " + std::to_string(e) + " out of range (n_experts " +
                                         std::to_string(*declared_) + ")");
            }
        return Status::ok();
    }

    bool null() override { return scalar(); }
    bool boolean(bool) override { return scalar(); }
    bool number_integer(number_integer_t v) override { return v < 0 ? fail(" is negative") : count(static_cast<uint64_t>(v)); }
    bool number_unsigned(number_unsigned_t v) override { return count(v); }
    bool number_float(number_float_t, const string_t&) override { return scalar(); }
    bool string(string_t&) override { return scalar(); }
    bool binary(binary_t&) override { return scalar(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        if (problem.empty()) problem = "not valid JSON";
        return false;
    }

    bool start_object(std::size_t) override {
        if (skip_depth_ > 0 || next_ == Next::Skip) return enter_skip();
        switch (next_) {
            case Next::Document: return push(Frame::Top);
            case Next::LayerEntry:
                layer_ = {};
                return push(Frame::Layer);
            default: return not_expected();
        }
    }
    bool start_array(std::size_t) override {
        if (skip_depth_ > 0 || next_ == Next::Skip) return enter_skip();
        switch (next_) {
            case Next::Layers: return push(Frame::Layers);
            case Next::Experts:
            case Next::Predicted:
                positions_list_ = next_ == Next::Predicted;
                return push(Frame::Positions);
            case Next::Choice: return push(Frame::Choice);
            default: return not_expected();
        }
    }
    bool key(string_t& k) override {
        if (skip_depth_ > 0) return true;
        auto once = [&](bool& seen, Next next) {
            if (seen) return fail_at(std::string(frame() == Frame::Top ? "" : where_layer() + ": ") + "\"" + k + "\" appears twice");
            seen = true;
            next_ = next;
            return true;
        };
        if (frame() == Frame::Top) {
            if (k == "layers") return once(saw_layers_, Next::Layers);
            if (k == "n_experts") return once(saw_n_experts_, Next::NExperts);
        } else {  // a layer's object
            if (k == "layer") return once(layer_.has_id, Next::LayerId);
            if (k == "experts") return once(layer_.has_experts, Next::Experts);
            if (k == "predicted") return once(layer_.has_predicted, Next::Predicted);
        }
        next_ = Next::Skip;
        return true;
    }
    bool end_object() override {
        if (skip_depth_ > 0) return leave_skip();
        if (frame() == Frame::Layer && !end_layer()) return false;
        return pop();
    }
    bool end_array() override {
        if (skip_depth_ > 0) return leave_skip();
        switch (frame()) {
            case Frame::Layers:
                if (trace.layers.empty()) return fail_at("\"layers\" is empty: the model has no MoE layer");
                break;
            case Frame::Positions:
                if (positions_list_) layer_.predicted_done = true;
                else layer_.experts_done = true;
                break;
            case Frame::Choice: {
                ChoiceList& list = positions_list_ ? layer_.predicted : layer_.experts;
                const size_t k = list.open_ids();
                const std::string at = where(trace.layers.size(), positions_list_, list.size());
                if (k == 0) return fail_at(at + " is not a non-empty array of expert ids");
                if (trace.top_k == 0) trace.top_k = static_cast<uint32_t>(k);
                if (k != trace.top_k)
                    return fail_at(at + " chooses " + std::to_string(k) + " experts, earlier positions " + std::to_string(trace.top_k));
                list.end_position();
                break;
            }
            default: break;
        }
        return pop();
    }

private:
    enum class Frame { Top, Layers, Layer, Positions, Choice };
    // What the next value is to be, set by the key or the container before it.
    enum class Next { Document, Skip, NExperts, Layers, LayerEntry, LayerId, Experts, Predicted, Choice, Id, None };
    struct LayerState {
        bool has_id = false, has_experts = false, has_predicted = false, experts_done = false, predicted_done = false;
        uint32_t id = 0;
        ChoiceList experts, predicted;
    };

    Frame frame() const { return frames_.back(); }
    bool push(Frame f) {
        frames_.push_back(f);
        next_ = f == Frame::Layers ? Next::LayerEntry : f == Frame::Positions ? Next::Choice : f == Frame::Choice ? Next::Id : Next::None;
        return true;
    }
    bool pop() {
        frames_.pop_back();
        after_value();
        return true;
    }
    // A value is complete: what the container around it takes next.
    void after_value() {
        if (frames_.empty()) next_ = Next::None;
        else if (frame() == Frame::Layers) next_ = Next::LayerEntry;
        else if (frame() == Frame::Positions) next_ = Next::Choice;
        else if (frame() == Frame::Choice) next_ = Next::Id;
        else next_ = Next::None;  // an object: a key comes first
    }
    bool enter_skip() {
        ++skip_depth_;
        return true;
    }
    bool leave_skip() {
        if (--skip_depth_ == 0) after_value();
        return true;
    }

    bool count(uint64_t v) {
        if (skip_depth_ > 0) return true;
        if (next_ == Next::Skip) return after_value(), true;
        if (v > std::numeric_limits<uint32_t>::max()) return fail(" is too large");
        const uint32_t u = static_cast<uint32_t>(v);
        switch (next_) {
            case Next::NExperts:
                if (u == 0) return fail_at("\"n_experts\" is 0");
                // Replay costs time and memory per expert and layer, whatever the file's size: no more than a model has.
                if (u > schema::kMaxExperts)
                    return fail_at("\"n_experts\" " + std::to_string(u) + " is more than a model can have (" + std::to_string(schema::kMaxExperts) + ")");
                declared_ = u;
                break;
            case Next::LayerId:
                if (u >= (uint32_t(1) << 16)) return fail_at(where_layer() + ".layer " + std::to_string(u) + " is implausibly large");
                layer_.id = u;
                break;
            case Next::Id: {
                ChoiceList& list = positions_list_ ? layer_.predicted : layer_.experts;
                const auto chosen = list.open_position();
                if (std::find(chosen.begin(), chosen.end(), u) != chosen.end())
                    return fail_at(where(trace.layers.size(), positions_list_, list.size()) + ": expert " + std::to_string(u) + " chosen twice");
                if (u >= schema::kMaxExperts)
                    return fail_at(where(trace.layers.size(), positions_list_, list.size()) + ": expert " + std::to_string(u) +
                                   " out of range (a model has at most " + std::to_string(schema::kMaxExperts) + " experts)");
                max_id_ = std::max(max_id_, u);
                list.push_id(u);
                return true;  // the choice's array goes on
            }
            default: return not_expected();
        }
        after_value();
        return true;
    }
    // A string, a boolean, null or a fraction: skipped where nothing is read, else the wrong kind of value.
    bool scalar() {
        if (skip_depth_ > 0) return true;
        if (next_ == Next::Skip) return after_value(), true;
        return not_expected();
    }
    // The message for a value of the wrong kind where `next_` wanted one.
    bool not_expected() {
        switch (next_) {
            case Next::Document: return fail_at("not a routing trace (expected an object with \"layers\")");
            case Next::NExperts:
            case Next::LayerId:
            case Next::Id: return fail(" is not an integer");
            case Next::Layers: return fail_at("no \"layers\" array (write it with colibri route --json)");
            case Next::LayerEntry: return fail_at(where_layer() + " is not an object");
            case Next::Experts: return fail_at(where_layer() + " has no \"experts\" array");
            case Next::Predicted: return fail_at(where_layer() + ".predicted is not an array of predictions");
            case Next::Choice: {
                const ChoiceList& list = positions_list_ ? layer_.predicted : layer_.experts;
                return fail_at(where(trace.layers.size(), positions_list_, list.size()) + " is not a non-empty array of expert ids");
            }
            default: return fail_at("not a routing trace");
        }
    }
    // `what` after the name of the number being read.
    bool fail(const std::string& what) {
        switch (next_) {
            case Next::NExperts: return fail_at("\"n_experts\"" + what);
            case Next::LayerId: return fail_at(where_layer() + ".layer" + what);
            case Next::Id: {
                const ChoiceList& list = positions_list_ ? layer_.predicted : layer_.experts;
                return fail_at(where(trace.layers.size(), positions_list_, list.size()) + " expert id" + what);
            }
            default: return scalar();
        }
    }
    bool fail_at(std::string what) {
        if (problem.empty()) problem = std::move(what);
        return false;
    }

    std::string where_layer() const { return "layers[" + std::to_string(trace.layers.size()) + "]"; }
    static std::string where(size_t li, bool predicted, size_t p) {
        return "layers[" + std::to_string(li) + "]." + (predicted ? "predicted[" : "experts[") + std::to_string(p) + "]";
    }

    bool end_layer() {
        LayerState& l = layer_;
        if (!l.has_id) return fail_at(where_layer() + " has no \"layer\"");
        if (!l.experts_done) return fail_at(where_layer() + " has no \"experts\" array");
        if (trace.layers.empty()) positions_ = l.experts.size();
        if (l.experts.size() != positions_)
            return fail_at(where_layer() + " has " + std::to_string(l.experts.size()) + " positions, layers[0] " + std::to_string(positions_));
        if (l.has_predicted && l.predicted.size() != positions_)
            return fail_at(where_layer() + ".predicted is not an array of " + std::to_string(positions_) + " predictions");
        if (std::find(trace.layers.begin(), trace.layers.end(), l.id) != trace.layers.end())
            return fail_at("layer " + std::to_string(l.id) + " appears twice");
        trace.layers.push_back(l.id);
        trace.choices.push_back(std::move(l.experts));
        trace.predicted.push_back(std::move(l.predicted));
        return true;
    }

    std::vector<Frame> frames_;
    Next next_ = Next::Document;
    size_t skip_depth_ = 0;
    bool positions_list_ = false;  // the array of positions being read is "predicted" (else "experts")
    bool saw_layers_ = false, saw_n_experts_ = false;
    std::optional<uint32_t> declared_;
    uint32_t max_id_ = 0;
    size_t positions_ = 0;
    LayerState layer_;
};

}  // namespace

void ChoiceList::end_position() {
    const size_t n = open_ids();
    if (!ragged_ && count_ > 0 && n != k_) {  // the first position of another size: every position gets its end
        ends_.reserve(count_ + 1);
        for (size_t p = 1; p <= count_; ++p) ends_.push_back(p * k_);
        ragged_ = true;
    }
    if (ragged_) ends_.push_back(ids_.size());
    else if (count_ == 0) k_ = n;
    ++count_;
}

bool ChoiceList::operator==(const ChoiceList& other) const {
    if (count_ != other.count_ || ids_ != other.ids_) return false;
    for (size_t p = 0; p < count_; ++p)
        if ((*this)[p].size() != other[p].size()) return false;
    return true;
}

Result<RoutingTrace> parse_routing_trace(std::string_view text) {
    if (json_too_deep(text)) return error("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    TraceReader reader;
    if (!json::sax_parse(text.begin(), text.end(), &reader)) return error(reader.problem.empty() ? "not valid JSON" : reader.problem);
    COLIBRI_TRY(reader.finish());
    return std::move(reader.trace);
}

Result<RoutingTrace> read_routing_trace(const std::string& path) {
    auto text = read_small_file(path, kMaxTraceBytes);  // a FIFO or a device is refused, not read until it ends
    if (!text) return text.status();
    auto t = parse_routing_trace(text.value());
    if (!t) return error(path + ": " + t.message());
    return t;
}

Status trace_fits_model(const RoutingTrace& trace, const Model& model) {
    const format::HyperParams& hp = model.hparams();
    if (trace.n_experts != hp.n_experts)
        return error("routes over " + std::to_string(trace.n_experts) + " experts per layer, the model has " + std::to_string(hp.n_experts));
    if (trace.top_k != hp.n_experts_active)
        return error("chooses " + std::to_string(trace.top_k) + " experts per token, the model " + std::to_string(hp.n_experts_active));
    for (uint32_t layer : trace.layers) {
        if (layer >= hp.n_layers) return error("layer " + std::to_string(layer) + " is past the model's " + std::to_string(hp.n_layers) + " layers");
        if (!model.layers()[layer].is_moe) return error("layer " + std::to_string(layer) + " is not one of the model's MoE layers");
    }
    return Status::ok();
}

Result<std::vector<std::vector<uint32_t>>> read_hot_experts(const std::string& path, const Model& model) {
    auto trace = read_routing_trace(path);
    if (!trace) return trace.status();
    if (Status s = trace_fits_model(trace.value(), model); !s) return error(path + ": not a trace of this model: " + s.message());
    return hot_experts(trace.value());
}

HotExpertSource hot_experts_from_trace(const std::string& path, const std::string& prefix) {
    return [path, prefix](const Model& model) -> Result<std::vector<std::vector<uint32_t>>> {
        auto hot = read_hot_experts(path, model);
        if (!hot) return error(prefix + hot.message());
        return hot;
    };
}

std::vector<std::vector<uint32_t>> pinned_sets(const RoutingTrace& trace, const RoutingTrace& source, uint32_t slots) {
    const uint32_t pins = slots > trace.top_k ? slots - trace.top_k : 0;
    std::vector<std::vector<uint32_t>> sets(trace.layers.size());
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        const auto it = std::find(source.layers.begin(), source.layers.end(), trace.layers[li]);
        if (it == source.layers.end()) continue;
        std::vector<uint64_t> counts(trace.n_experts, 0);
        for (const auto& choice : source.choices[size_t(it - source.layers.begin())])
            for (uint32_t e : choice)
                if (e < counts.size()) ++counts[e];
        sets[li] = hot_set(counts, pins);
    }
    return sets;
}

std::vector<std::vector<uint64_t>> expert_heat(const RoutingTrace& trace) {
    uint32_t last = 0;
    for (uint32_t l : trace.layers) last = std::max(last, l);
    std::vector<std::vector<uint64_t>> heat(trace.layers.empty() ? 0 : size_t(last) + 1);
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        std::vector<uint64_t>& counts = heat[trace.layers[li]];
        counts.assign(trace.n_experts, 0);
        for (const auto& choice : trace.choices[li])
            for (uint32_t e : choice) ++counts[e];
    }
    return heat;
}

std::vector<std::vector<uint32_t>> hot_experts(const RoutingTrace& trace) {
    const std::vector<std::vector<uint64_t>> heat = expert_heat(trace);
    std::vector<std::vector<uint32_t>> hot(heat.empty() ? 1 : heat.size());
    for (uint32_t l : trace.layers) hot[l] = hot_set(heat[l], trace.n_experts);
    return hot;
}

bool RoutingTrace::has_predictions() const {
    for (const auto& p : predicted)
        if (!p.empty()) return true;
    return false;
}

std::vector<PredictionAccuracy> prediction_accuracy(const RoutingTrace& trace) {
    std::vector<PredictionAccuracy> out;
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        if (li >= trace.predicted.size() || trace.predicted[li].empty()) continue;
        PredictionAccuracy a{trace.layers[li], 0, 0};
        for (size_t p = 0; p < trace.choices[li].size(); ++p) {
            const auto& guess = trace.predicted[li][p];
            for (uint32_t e : trace.choices[li][p]) {
                ++a.chosen;
                a.right += std::find(guess.begin(), guess.end(), e) != guess.end();
            }
        }
        out.push_back(a);
    }
    return out;
}

ReplayResult replay(const RoutingTrace& trace, CachePolicy policy, uint32_t slots, const RoutingTrace& pin_source,
                    bool with_prediction) {
    ReplayResult r;
    r.policy = std::string(cache_policy_name(policy)) + (with_prediction ? "+prediction" : "");
    r.slot_count = slots;
    std::vector<std::vector<uint32_t>> pins;
    if (policy == CachePolicy::Pinned) pins = pinned_sets(trace, pin_source, slots);
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        ExpertSlots cache(policy, trace.n_experts, slots, pins.empty() ? std::span<const uint32_t>() : pins[li]);
        LayerHits h{trace.layers[li], 0, 0, 0};
        const bool predicted = with_prediction && li < trace.predicted.size() && !trace.predicted[li].empty();
        for (size_t p = 0; p < trace.choices[li].size(); ++p) {
            const auto& choice = trace.choices[li][p];
            if (predicted) {
                // As the engine: the prediction is read in while the layer before computes, before this layer's
                // clock moves for the token; a group of its own, so that no predicted expert evicts another.
                cache.begin_group();
                for (uint32_t e : trace.predicted[li][p]) {
                    const auto a = cache.access(e);
                    if (!a) break;
                    h.prefetched += a->hit ? 0 : 1;
                }
            }
            cache.advance(1);
            cache.begin_group();
            for (uint32_t e : choice) {
                auto a = cache.access(e);
                if (!a) {  // too few free slots for the whole choice: the engine computes it in two groups
                    cache.begin_group();
                    a = cache.access(e);
                }
                h.hits += a && a->hit ? 1 : 0;
                ++h.accesses;
            }
        }
        r.hits += h.hits;
        r.accesses += h.accesses;
        r.prefetched += h.prefetched;
        r.layers.push_back(h);
    }
    return r;
}

ReplayResult replay_belady(const RoutingTrace& trace, uint32_t slots) {
    constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
    ReplayResult r;
    r.policy = "belady";
    r.slot_count = slots;
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        std::vector<uint32_t> seq;
        for (const auto& choice : trace.choices[li]) seq.insert(seq.end(), choice.begin(), choice.end());
        // next[i]: the index of the next request for seq[i]'s expert.
        std::vector<uint64_t> next(seq.size(), kNever), upcoming(trace.n_experts, kNever);
        for (size_t i = seq.size(); i-- > 0;) {
            next[i] = upcoming[seq[i]];
            upcoming[seq[i]] = i;
        }
        std::set<std::pair<uint64_t, uint32_t>> resident;  // (next use, expert)
        std::vector<uint64_t> next_of(trace.n_experts, 0);
        std::vector<bool> in(trace.n_experts, false);
        LayerHits h{trace.layers[li], 0, 0, 0};
        for (size_t i = 0; i < seq.size(); ++i) {
            const uint32_t e = seq[i];
            ++h.accesses;
            if (in[e]) {
                ++h.hits;
                resident.erase({next_of[e], e});
            } else if (resident.size() >= slots) {
                // The furthest next use. It may be an expert the current token has used already, which the
                // engine keeps until the token is done: MIN is then a bound the policies cannot reach, not a rival.
                const auto victim = std::prev(resident.end());
                in[victim->second] = false;
                resident.erase(victim);
            }
            in[e] = true;
            next_of[e] = next[i];
            resident.insert({next[i], e});
        }
        r.hits += h.hits;
        r.accesses += h.accesses;
        r.layers.push_back(h);
    }
    return r;
}

Result<std::vector<uint32_t>> parse_slot_counts(std::string_view text, const RoutingTrace& trace) {
    auto number = [](std::string_view s) -> Result<uint32_t> {
        if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos)
            return error("'" + std::string(s) + "' is not a slot count");
        return static_cast<uint32_t>(std::stoul(std::string(s)));
    };
    std::vector<uint32_t> counts;
    if (const size_t dots = text.find(".."); dots != std::string_view::npos) {
        auto a = number(text.substr(0, dots)), b = number(text.substr(dots + 2));
        if (!a) return a.status();
        if (!b) return b.status();
        if (a.value() > b.value()) return error("empty range " + std::string(text));
        for (uint32_t s = a.value(); s <= b.value() && s <= trace.n_experts; ++s) counts.push_back(s);
        if (b.value() > trace.n_experts) counts.push_back(b.value());  // reported as out of range below
    } else {
        size_t pos = 0;
        while (pos <= text.size()) {
            const size_t comma = text.find(',', pos);
            auto v = number(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
            if (!v) return v.status();
            counts.push_back(v.value());
            if (comma == std::string_view::npos) break;
            pos = comma + 1;
        }
    }
    for (uint32_t s : counts)
        if (s < trace.top_k || s > trace.n_experts)
            return error("slot count " + std::to_string(s) + " outside " + std::to_string(trace.top_k) + ".." +
                         std::to_string(trace.n_experts) + " (experts per token .. experts per layer)");
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

std::vector<uint32_t> default_slot_counts(const RoutingTrace& trace) {
    std::vector<uint32_t> counts;
    for (uint32_t eighths : {1u, 2u, 4u, 6u})
        counts.push_back(std::clamp((trace.n_experts * eighths + 4) / 8, trace.top_k, trace.n_experts));
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    return counts;
}

CacheSimReport cache_sim(const RoutingTrace& trace, const std::vector<uint32_t>& slot_counts,
                         const RoutingTrace& pin_source, std::string pin_source_name) {
    CacheSimReport rep;
    rep.n_experts = trace.n_experts;
    rep.top_k = trace.top_k;
    rep.positions = trace.choices.empty() ? 0 : static_cast<uint32_t>(trace.choices[0].size());
    rep.layers = trace.layers.size();
    rep.pin_source = std::move(pin_source_name);
    const bool predictions = trace.has_predictions();
    rep.runs_per_count = predictions ? 5 : 4;
    if (predictions) rep.prediction = prediction_accuracy(trace);
    for (uint32_t slots : slot_counts) {
        for (CachePolicy p : {CachePolicy::Lru, CachePolicy::Lfru, CachePolicy::Pinned})
            rep.runs.push_back(replay(trace, p, slots, pin_source));
        rep.runs.push_back(replay_belady(trace, slots));
        if (predictions) rep.runs.push_back(replay(trace, CachePolicy::Lru, slots, pin_source, true));
    }
    return rep;
}

json cache_sim_json(const CacheSimReport& rep) {
    json runs = json::array();
    for (const ReplayResult& r : rep.runs) {
        json layers = json::array();
        for (const LayerHits& h : r.layers)
            layers.push_back({{"layer", h.layer}, {"hits", h.hits}, {"accesses", h.accesses}, {"prefetched", h.prefetched},
                              {"hit_rate", h.accesses ? double(h.hits) / double(h.accesses) : 0.0}});
        runs.push_back({{"policy", r.policy}, {"slots", r.slot_count}, {"hits", r.hits}, {"accesses", r.accesses},
                        {"prefetched", r.prefetched}, {"hit_rate", r.rate()}, {"layers", layers}});
    }
    json out{{"n_experts", rep.n_experts}, {"top_k", rep.top_k}, {"positions", rep.positions}, {"layers", rep.layers},
             {"lfru_decay", kLfruDecay}, {"pinned_from", rep.pin_source}, {"runs", runs}};
    if (!rep.prediction.empty()) {
        json pred = json::array();
        uint64_t right = 0, chosen = 0;
        for (const PredictionAccuracy& a : rep.prediction) {
            pred.push_back({{"layer", a.layer}, {"right", a.right}, {"chosen", a.chosen},
                            {"accuracy", a.chosen ? double(a.right) / double(a.chosen) : 0.0}});
            right += a.right;
            chosen += a.chosen;
        }
        out["prediction"] = {{"layers", pred}, {"accuracy", chosen ? double(right) / double(chosen) : 0.0}};
    }
    return out;
}

std::string cache_sim_text(const CacheSimReport& rep) {
    std::ostringstream out;
    char line[256];
    std::snprintf(line, sizeof line, "%zu MoE layers, %u positions, %u experts per layer, top-%u; hot set for pinned: %s\n",
                  rep.layers, rep.positions, rep.n_experts, rep.top_k, rep.pin_source.c_str());
    out << line;
    auto pct = [](uint64_t h, uint64_t a) { return a ? 100.0 * double(h) / double(a) : 0.0; };
    if (!rep.prediction.empty()) {
        uint64_t right = 0, chosen = 0;
        out << "prediction (each layer's router one layer ahead; the first MoE layer's on the embeddings), share of the chosen experts named:";
        for (const PredictionAccuracy& a : rep.prediction) {
            std::snprintf(line, sizeof line, " L%u %.1f%%", a.layer, pct(a.right, a.chosen));
            out << line;
            right += a.right;
            chosen += a.chosen;
        }
        std::snprintf(line, sizeof line, "; all %.1f%%\n", pct(right, chosen));
        out << line;
    }
    // Runs come in groups per slot count: lru, lfru, pinned, belady (, lru+prediction).
    const size_t per = rep.runs_per_count;
    for (size_t i = 0; i + per - 1 < rep.runs.size(); i += per) {
        std::snprintf(line, sizeof line, "\nslots per layer %u (%.1f %% of the experts)\n%-8s %8s %8s %8s %8s",
                      rep.runs[i].slot_count, 100.0 * rep.runs[i].slot_count / rep.n_experts, "layer", "lru", "lfru", "pinned", "belady");
        out << line << (per > 4 ? "  lru+prediction\n" : "\n");
        for (size_t li = 0; li < rep.runs[i].layers.size(); ++li) {
            std::snprintf(line, sizeof line, "%-8u", rep.runs[i].layers[li].layer);
            out << line;
            for (size_t p = 0; p < per; ++p) {
                const LayerHits& h = rep.runs[i + p].layers[li];
                std::snprintf(line, sizeof line, " %7.1f%%", pct(h.hits, h.accesses));
                out << line;
            }
            out << '\n';
        }
        std::snprintf(line, sizeof line, "%-8s", "all");
        out << line;
        for (size_t p = 0; p < per; ++p) {
            std::snprintf(line, sizeof line, " %7.1f%%", 100.0 * rep.runs[i + p].rate());
            out << line;
        }
        out << '\n';
    }
    return out.str();
}

}  // namespace colibri::tools
