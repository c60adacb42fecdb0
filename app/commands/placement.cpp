// `colibri placement`: which rank holds each expert in an expert-parallel run (mpirun -np N colibri generate
// --placement FILE), balanced from a routing trace (colibri route --json): each rank's expected share is printed.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/core/model.h"
#include "engine/distributed/expert_placement.h"
#include "model_options.h"
#include "tools/cache_sim.h"
#include "tools/model_output.h"

namespace colibri::cli {

namespace {

struct PlacementArgs {
    std::string model, trace, out;
    uint32_t ranks = 2, replicate = 0;
    bool as_json = false;
};

int cmd_placement(const PlacementArgs& a) {
    if (a.ranks < 1 || a.ranks > ExpertPlacement::kMaxRanks)
        return fail("placement", "--ranks must be in [1, " + std::to_string(ExpertPlacement::kMaxRanks) + "]");
    auto model = Model::load(a.model);
    if (!model) return fail("placement", model.message());
    auto trace = tools::read_routing_trace(a.trace);
    if (!trace) return fail("placement", trace.message());
    if (Status s = tools::trace_fits_model(trace.value(), *model.value()); !s) return fail("placement", a.trace + ": " + s.message());
    const PlacementShape shape = model.value()->placement_shape();
    if (a.replicate > shape.n_experts)
        return fail("placement", "--replicate " + std::to_string(a.replicate) + ": the model has " + std::to_string(shape.n_experts) + " experts per layer");
    const std::vector<std::vector<uint64_t>> heat = tools::expert_heat(trace.value());
    const ExpertPlacement placement = ExpertPlacement::balanced(a.ranks, shape, heat, a.replicate);
    const std::string text = placement.to_json();
    if (Status s = tools::write_output_file(a.out, text.data(), text.size()); !s) return fail("placement", s.message());
    const std::vector<double> shares = placement.expected_shares(heat);
    const std::vector<double> dealt = ExpertPlacement::round_robin(a.ranks, shape).expected_shares(heat);
    if (a.as_json) {
        std::printf("%s\n", nlohmann::json{{"ranks", a.ranks}, {"replicate", a.replicate}, {"expected_share", shares},
                                           {"round_robin_share", dealt}, {"out", a.out}}.dump().c_str());
        return 0;
    }
    for (uint32_t r = 0; r < a.ranks; ++r)
        std::printf("rank %u: %.1f%% of the expert work (round-robin: %.1f%%)\n", r, 100.0 * shares[r], 100.0 * dealt[r]);
    return 0;
}

class Placement final : public Command {
public:
    explicit Placement(CLI::App& app) {
        sub_ = app.add_subcommand("placement", "spread the experts over mpirun's ranks, balanced from a routing trace");
        sub_->add_option("-m,--model", a_.model, "model file (.bin)")->required();
        sub_->add_option("--trace", a_.trace, "routing trace of this model (colibri route --json)")->required();
        sub_->add_option("--ranks", a_.ranks, "ranks of the run (mpirun -np N)")->required();
        sub_->add_option("--replicate", a_.replicate, "the hottest N experts of each layer on every rank (default 0)");
        sub_->add_option("-o,--out", a_.out, "placement JSON to write (--placement FILE)")->required();
        sub_->add_flag("--json", a_.as_json, "JSON output");
    }
    int run() override { return cmd_placement(a_); }

private:
    PlacementArgs a_;
};

}  // namespace

std::unique_ptr<Command> placement_command(CLI::App& app) { return std::make_unique<Placement>(app); }

}  // namespace colibri::cli
