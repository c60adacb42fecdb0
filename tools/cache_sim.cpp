#include "cache_sim.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "engine/json_depth.h"
#include "engine/mapped_file.h"
#include "engine/model.h"
#include "engine/schema.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

Result<uint32_t> as_count(const json& v, const std::string& what) {
    if (!v.is_number_integer() && !v.is_number_unsigned()) return error(what + " is not an integer");
    if (v.is_number_integer() && v.get<int64_t>() < 0) return error(what + " is negative");
    const uint64_t u = v.get<uint64_t>();
    if (u > std::numeric_limits<uint32_t>::max()) return error(what + " is too large");
    return static_cast<uint32_t>(u);
}

}  // namespace

Result<RoutingTrace> parse_routing_trace(std::string_view text) {
    if (json_too_deep(text)) return error("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    const json doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (doc.is_discarded()) return error("not valid JSON");
    if (!doc.is_object()) return error("not a routing trace (expected an object with \"layers\")");
    const auto layers = doc.find("layers");
    if (layers == doc.end() || !layers->is_array()) return error("no \"layers\" array (write it with colibri route --json)");
    if (layers->empty()) return error("\"layers\" is empty: the model has no MoE layer");

    RoutingTrace t;
    bool declared = false;
    if (const auto n = doc.find("n_experts"); n != doc.end()) {
        auto v = as_count(*n, "\"n_experts\"");
        if (!v) return v.status();
        if (v.value() == 0) return error("\"n_experts\" is 0");
        // Replay costs time and memory per expert and layer, whatever the file's size: no more than a model has.
        if (v.value() > schema::kMaxExperts)
            return error("\"n_experts\" " + std::to_string(v.value()) + " is more than a model can have (" +
                         std::to_string(schema::kMaxExperts) + ")");
        t.n_experts = v.value();
        declared = true;
    }
    uint32_t max_id = 0;
    size_t positions = 0;
    std::set<uint32_t> seen_layers;
    for (size_t li = 0; li < layers->size(); ++li) {
        const json& l = (*layers)[li];
        const std::string where = "layers[" + std::to_string(li) + "]";
        if (!l.is_object()) return error(where + " is not an object");
        const auto id = l.find("layer");
        if (id == l.end()) return error(where + " has no \"layer\"");
        auto layer = as_count(*id, where + ".layer");
        if (!layer) return layer.status();
        if (layer.value() >= (uint32_t(1) << 16)) return error(where + ".layer " + std::to_string(layer.value()) + " is implausibly large");
        if (!seen_layers.insert(layer.value()).second) return error("layer " + std::to_string(layer.value()) + " appears twice");
        const auto ex = l.find("experts");
        if (ex == l.end() || !ex->is_array()) return error(where + " has no \"experts\" array");
        if (li == 0) positions = ex->size();
        if (ex->size() != positions)
            return error(where + " has " + std::to_string(ex->size()) + " positions, layers[0] " + std::to_string(positions));
        // One position's choice (or prediction): top_k distinct ids in range.
        auto read_choice = [&](const json& choice, const std::string& at) -> Result<std::vector<uint32_t>> {
            if (!choice.is_array() || choice.empty()) return error(at + " is not a non-empty array of expert ids");
            if (t.top_k == 0) t.top_k = static_cast<uint32_t>(choice.size());
            if (choice.size() != t.top_k)
                return error(at + " chooses " + std::to_string(choice.size()) + " experts, earlier positions " + std::to_string(t.top_k));
            std::vector<uint32_t> ids;
            ids.reserve(choice.size());
            for (const json& e : choice) {
                auto v = as_count(e, at + " expert id");
                if (!v) return v.status();
                if (declared && v.value() >= t.n_experts)
                    return error(at + ": expert " + std::to_string(v.value()) + " out of range (n_experts " + std::to_string(t.n_experts) + ")");
                if (std::find(ids.begin(), ids.end(), v.value()) != ids.end())
                    return error(at + ": expert " + std::to_string(v.value()) + " chosen twice");
                if (!declared && v.value() >= schema::kMaxExperts)
                    return error(at + ": expert " + std::to_string(v.value()) + " out of range (a model has at most " +
                                 std::to_string(schema::kMaxExperts) + " experts)");
                max_id = std::max(max_id, v.value());
                ids.push_back(v.value());
            }
            return ids;
        };
        std::vector<std::vector<uint32_t>> per_position;
        per_position.reserve(ex->size());
        for (size_t p = 0; p < ex->size(); ++p) {
            auto ids = read_choice((*ex)[p], where + ".experts[" + std::to_string(p) + "]");
            if (!ids) return ids.status();
            per_position.push_back(std::move(ids.value()));
        }
        std::vector<std::vector<uint32_t>> predicted;
        if (const auto pr = l.find("predicted"); pr != l.end()) {
            if (!pr->is_array() || pr->size() != positions)
                return error(where + ".predicted is not an array of " + std::to_string(positions) + " predictions");
            predicted.reserve(pr->size());
            for (size_t p = 0; p < pr->size(); ++p) {
                auto ids = read_choice((*pr)[p], where + ".predicted[" + std::to_string(p) + "]");
                if (!ids) return ids.status();
                predicted.push_back(std::move(ids.value()));
            }
        }
        t.layers.push_back(layer.value());
        t.choices.push_back(std::move(per_position));
        t.predicted.push_back(std::move(predicted));
    }
    if (positions == 0) return error("the trace has no positions");
    if (!declared) t.n_experts = max_id + 1;
    return t;
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

std::vector<std::vector<uint32_t>> hot_experts(const RoutingTrace& trace) {
    uint32_t last = 0;
    for (uint32_t l : trace.layers) last = std::max(last, l);
    std::vector<std::vector<uint32_t>> hot(size_t(last) + 1);
    for (size_t li = 0; li < trace.layers.size(); ++li) {
        std::vector<uint64_t> counts(trace.n_experts, 0);
        for (const auto& choice : trace.choices[li])
            for (uint32_t e : choice) ++counts[e];
        hot[trace.layers[li]] = hot_set(counts, trace.n_experts);
    }
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
