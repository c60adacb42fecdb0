// What the subcommands share: the model, input and sampler options as the command line takes them, opening the
// model the one way (engine/core/open_model.h), and the one error line.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/sampler.h"
#include "engine/core/speculation.h"
#include "tools/model_args.h"

namespace colibri::cli {

// `colibri: <what>: <why>` on stderr; returns the exit status 1.
int fail(const std::string& what, const std::string& why);

// --ram-budget, --cache-policy, --hot-trace, --cache-prefetch.
void add_budget_args(CLI::App* cmd, tools::ModelArgs& m);
// -m (required, or else the build's demo model: chat and eval), -t, -c and the budget options.
void add_model_args(CLI::App* cmd, tools::ModelArgs& m, bool required);
// --placement and --rank-timeout: the command runs expert-parallel under mpirun (generate, logits, bench, chat, serve).
void add_rank_args(CLI::App* cmd, tools::ModelArgs& m);
void add_input_args(CLI::App* cmd, std::string& tokens, std::string& prompt);
// The sampler options; any the user leaves out take the model's generation_config.json defaults (sampler_for_model).
void add_sampler_args(CLI::App* cmd, SamplerConfig& s);
// The sampling a command runs with: the model's defaults (Model::generation_defaults) over Colibri's, and over both
// every sampler option given on `cmd`'s command line.
SamplerConfig sampler_for_model(const CLI::App& cmd, const SamplerConfig& given, const Model& model);
// --speculate lookup|mtp|off (engine/core/speculation.h), checked when the command runs; `mode` holds the default.
CLI::Option* add_speculate_arg(CLI::App* cmd, std::string& mode);

// Under mpirun a command without add_rank_args is refused; ranks other than 0 print nothing on stdout, and an error
// every rank meets alike (a refused placement) is said by rank 0 alone. Without with_session, the model alone (serve
// starts its own pool and sessions).
Result<OpenedModel> load(const tools::ModelArgs& args, bool with_session = true);
// The model and the input tokens (--tokens or --prompt), checked against its vocabulary.
struct LoadedInput {
    OpenedModel l;
    std::vector<int32_t> ids;
};
Result<LoadedInput> load_with_input(const tools::ModelArgs& args, const std::string& tokens, const std::string& prompt);

// Shows streamed text at once.
void print(const std::string& text);

}  // namespace colibri::cli
