// `colibri route`: the router's choices per layer and token (and the expert cache's records with a budget).
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "command.h"
#include "engine/core/model.h"
#include "engine/core/router.h"
#include "engine/core/trace.h"
#include "model_options.h"
#include "tools/model_summary.h"
#include "tools/router_compare.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

struct RouteCollector : TraceObserver {
    // per layer: per position
    std::map<uint32_t, std::vector<std::vector<int32_t>>> experts;
    std::map<uint32_t, std::vector<std::vector<float>>> weights, probs, selection;
    std::map<uint32_t, std::vector<std::vector<uint32_t>>> groups;
    std::map<uint32_t, json> cache;  // per layer: the expert cache's records (--ram-budget)
    std::map<uint32_t, std::vector<std::vector<int32_t>>> predicted;  // per layer: per position (--predict)
    void on_prediction(const PredictionRecord& p) override { predicted[p.layer].emplace_back(p.experts.begin(), p.experts.end()); }
    void on_cache(const CacheRecord& c) override {
        cache[c.layer].push_back({{"position", c.position}, {"tokens", c.tokens}, {"hits", c.hits}, {"misses", c.misses},
                                  {"bytes_read", c.bytes_read}, {"stall_ns", c.stall_ns}, {"prefetched", c.prefetched},
                                  {"predicted", c.predicted}, {"predicted_right", c.predicted_right}});
    }
    void on_routing(const RoutingRecord& r) override {
        experts[r.layer].emplace_back(r.experts.begin(), r.experts.end());
        weights[r.layer].emplace_back(r.weights.begin(), r.weights.end());
        probs[r.layer].emplace_back(r.router_probs.begin(), r.router_probs.end());
        selection[r.layer].emplace_back(r.selection.begin(), r.selection.end());
        groups[r.layer].emplace_back(r.groups.begin(), r.groups.end());
    }
};

struct RouteArgs {
    std::string router = "exact";
    bool compare = false;  // agreement of --router with the exact router
    bool with_probs = false;
    bool predict = false;  // each MoE layer's experts predicted one layer ahead, per position
};

int cmd_route(const tools::ModelArgs& args, const std::string& tokens, const std::string& prompt, const RouteArgs& ra) {
    const std::optional<RouterKind> kind = parse_router_kind(ra.router);
    if (!kind) return fail("route", "unknown router '" + ra.router + "' (exact or lut)");
    auto loaded = load_with_input(args, tokens, prompt);
    if (!loaded) return fail("route", loaded.message());
    OpenedModel& l = loaded->l;
    const std::vector<int32_t>& ids = loaded->ids;
    if (Status s = check_router_supports(l.model->rules().routing, *kind); !s) return fail("route", s.message());
    if (ra.compare) {
        auto a = tools::compare_routers(*l.model, *l.pool, ids, *kind);
        if (!a) return fail("route", a.message());
        std::printf("%s\n", tools::router_agreement_json(a.value()).dump().c_str());
        return 0;
    }
    RouteCollector collector;
    l.session->set_router(*kind);
    l.session->set_predict_experts(ra.predict);
    l.session->set_observer(&collector);
    if (auto r = l.session->eval(std::span<const int32_t>(ids)); !r) return fail("route", r.message());
    json layers = json::array();
    for (const auto& [layer, ex] : collector.experts) {
        // Existing fields first; selection_scores (what selected each expert: score + selection bias) and, for
        // group-limited routers, the groups each token's choice was limited to.
        json e{{"layer", layer}, {"experts", ex}, {"weights", collector.weights[layer]}, {"selection_scores", collector.selection[layer]}};
        if (l.model->rules().routing.n_group > 1) e["groups"] = collector.groups[layer];
        if (ra.with_probs) e["probs"] = collector.probs[layer];
        if (collector.cache.count(layer)) e["cache"] = collector.cache[layer];
        if (ra.predict && collector.predicted.count(layer)) e["predicted"] = collector.predicted[layer];
        layers.push_back(e);
    }
    json out{{"tokens", ids}, {"router", router_kind_name(*kind)}, {"routing", tools::routing_json(*l.model)},
             {"n_experts", l.model->hparams().n_experts}, {"layers", layers}};
    if (const ExpertCache* c = l.model->expert_cache()) out["expert_cache"] = tools::expert_cache_json(*c);
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

class Route final : public Command {
public:
    explicit Route(CLI::App& app) {
        sub_ = app.add_subcommand("route", "print the router's choices per layer and token");
        add_model_args(sub_, args_, true);
        add_input_args(sub_, tokens_, prompt_);
        sub_->add_flag("--json", as_json_, "JSON output (the only format)");
        sub_->add_flag("--probs", route_.with_probs, "include the full router distribution");
        sub_->add_option("--router", route_.router, "router: exact (default) or lut (integer, table exp)");
        sub_->add_flag("--compare", route_.compare, "report the top-k agreement of --router with the exact router");
        sub_->add_flag("--predict", route_.predict,
                       "also the experts predicted for each MoE layer at the one before it (the next router on the current "
                       "hidden state, as --cache-prefetch reads ahead): per layer \"predicted\", for colibri cache-sim");
    }
    int run() override { return cmd_route(args_, tokens_, prompt_, route_); }

private:
    tools::ModelArgs args_;
    std::string tokens_, prompt_;
    bool as_json_ = false;
    RouteArgs route_;
};

}  // namespace

std::unique_ptr<Command> route_command(CLI::App& app) { return std::make_unique<Route>(app); }

}  // namespace colibri::cli
