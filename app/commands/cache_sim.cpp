// `colibri cache-sim`: a routing trace replayed through the expert-cache policies (tools/cache_sim.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "model_options.h"
#include "tools/cache_sim.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

struct CacheSimArgs {
    std::string trace;
    std::string slots;      // empty: tools::default_slot_counts
    std::string pin_trace;  // empty: the hot set is learned from the replayed trace itself
    bool as_json = false;
};

int cmd_cache_sim(const CacheSimArgs& a) {
    auto trace = tools::read_routing_trace(a.trace);
    if (!trace) return fail("cache-sim", trace.message());
    std::optional<tools::RoutingTrace> pin_source;
    if (!a.pin_trace.empty()) {
        auto p = tools::read_routing_trace(a.pin_trace);
        if (!p) return fail("cache-sim", p.message());
        if (p->n_experts > trace->n_experts)
            return fail("cache-sim", a.pin_trace + ": routes over " + std::to_string(p->n_experts) + " experts, the trace over " +
                                         std::to_string(trace->n_experts));
        pin_source = std::move(p.value());
    }
    std::vector<uint32_t> slots = tools::default_slot_counts(trace.value());
    if (!a.slots.empty()) {
        auto s = tools::parse_slot_counts(a.slots, trace.value());
        if (!s) return fail("cache-sim", "--slots: " + s.message());
        slots = std::move(s.value());
    }
    const tools::CacheSimReport rep = tools::cache_sim(trace.value(), slots, pin_source ? *pin_source : trace.value(),
                                                       pin_source ? a.pin_trace : std::string("in-sample"));
    if (a.as_json) std::printf("%s\n", tools::cache_sim_json(rep).dump().c_str());
    else std::fputs(tools::cache_sim_text(rep).c_str(), stdout);
    return 0;
}

class CacheSim final : public Command {
public:
    explicit CacheSim(CLI::App& app) {
        sub_ = app.add_subcommand("cache-sim", "replay a routing trace (route --json): LRU, LFRU, pinned and Belady hit rates per layer");
        sub_->add_option("trace", args_.trace, "routing trace (colibri route --json output)")->required();
        sub_->add_option("--slots", args_.slots, "slots per layer: A..B, N or A,B,C (default: 12.5, 25, 50, 75 % of the experts)");
        sub_->add_option("--pin-trace", args_.pin_trace, "learn the pinned hot set from this trace (default: the replayed one)");
        sub_->add_flag("--json", args_.as_json, "JSON output");
    }
    int run() override { return cmd_cache_sim(args_); }

private:
    CacheSimArgs args_;
};

}  // namespace

std::unique_ptr<Command> cache_sim_command(CLI::App& app) { return std::make_unique<CacheSim>(app); }

}  // namespace colibri::cli
