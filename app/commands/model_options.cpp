#include "model_options.h"

#include <cstdio>

#include "engine/distributed/launch.h"

#ifndef COLIBRI_DEMO_MODEL
#define COLIBRI_DEMO_MODEL ""
#endif

namespace colibri::cli {

namespace {
bool quiet_failure = false;  // a rank other than 0 refusing what rank 0 refuses alike
}

int fail(const std::string& what, const std::string& why) {
    if (!quiet_failure) std::fprintf(stderr, "colibri: %s: %s\n", what.c_str(), why.c_str());
    return 1;
}

void add_budget_args(CLI::App* cmd, tools::ModelArgs& m) {
    cmd->add_option("--ram-budget", m.ram_budget,
                    "keep the weights within SIZE (e.g. 6G, 512M) or a share of the model file (e.g. 50%): routed "
                    "experts in a cache of slots read from the file");
    cmd->add_option("--cache-policy", m.cache_policy, "expert cache policy: lru (default), lfru or pinned");
    cmd->add_option("--hot-trace", m.hot_trace, "pinned: learn the hot experts from this routing trace (route --json)");
    cmd->add_flag("--cache-prefetch", m.cache_prefetch,
                  "predict the next MoE layer's experts (its router on the current hidden state) and read them ahead");
}

void add_model_args(CLI::App* cmd, tools::ModelArgs& m, bool required) {
    if (!required) m.path = COLIBRI_DEMO_MODEL;
    auto* opt = cmd->add_option("-m,--model", m.path, "model file (.bin)");
    if (required) opt->required();
    cmd->add_option("-t,--threads", m.threads, "worker threads (default: all cores)");
    cmd->add_option("-c,--context", m.context, "context length in tokens (default: min(model, 4096))");
    add_budget_args(cmd, m);
}

void add_rank_args(CLI::App* cmd, tools::ModelArgs& m) {
    m.ranks = true;
    cmd->add_option("--placement", m.placement,
                    "under mpirun: which rank holds each expert (JSON from colibri placement; default round-robin)");
    cmd->add_option("--rank-timeout", m.rank_timeout_s, "under mpirun: seconds an exchange waits for the other ranks (default 60)");
}

void add_input_args(CLI::App* cmd, std::string& tokens, std::string& prompt) {
    cmd->add_option("--tokens", tokens, "comma-separated token ids");
    cmd->add_option("--prompt", prompt, "text to tokenize");
}

void add_sampler_args(CLI::App* cmd, SamplerConfig& s) {
    cmd->add_flag("--greedy", s.greedy, "always take the most likely token");
    cmd->add_option("--seed", s.seed, "random seed");
    cmd->add_option("--temperature", s.temperature, "temperature (0, or below 1e-4, = greedy)");
    cmd->add_option("--top-k", s.top_k, "keep the k most likely tokens (0 = off)");
    cmd->add_option("--top-p", s.top_p, "nucleus sampling threshold (1 = off)");
    cmd->add_option("--min-p", s.min_p, "drop tokens below min-p x the best probability (0 = off)");
    cmd->add_option("--repeat-penalty", s.repetition_penalty, "repetition penalty (1 = off)");
    cmd->add_option("--repeat-last-n", s.repetition_window, "tokens the repetition penalty looks back over");
    cmd->footer("Sampling: options not given take the model's defaults from its generation_config.json (do_sample false = "
                "greedy; temperature, top_k, top_p, min_p, repetition_penalty), then Colibri's (temperature 0.8, top-k 40, "
                "top-p 0.95, min-p 0.05). `colibri info` shows a model's defaults.");
}

SamplerConfig sampler_for_model(const CLI::App& cmd, const SamplerConfig& given, const Model& model) {
    SamplerConfig s = apply_generation_defaults(SamplerConfig{}, model.generation_defaults());
    s.seed = given.seed;
    auto set = [&cmd](const char* name) { return cmd.count(name) > 0; };
    // A sampling option the user gives means sampling, even on a model whose authors chose greedy decoding.
    if (set("--temperature") || set("--top-k") || set("--top-p") || set("--min-p")) s.greedy = false;
    if (set("--greedy")) s.greedy = given.greedy;
    if (set("--temperature")) s.temperature = given.temperature;
    if (set("--top-k")) s.top_k = given.top_k;
    if (set("--top-p")) s.top_p = given.top_p;
    if (set("--min-p")) s.min_p = given.min_p;
    if (set("--repeat-penalty")) s.repetition_penalty = given.repetition_penalty;
    if (set("--repeat-last-n")) s.repetition_window = given.repetition_window;
    return s;
}

CLI::Option* add_speculate_arg(CLI::App* cmd, std::string& mode) {
    return cmd->add_option("--speculate", mode, "speculative decoding: lookup (drafts from the context), mtp (the model's head), off")
        ->capture_default_str();
}

Result<OpenedModel> load(const tools::ModelArgs& args, bool with_session) {
    if (!args.ranks && launched_ranks() > 1) {
        quiet_failure = launched_rank() != 0;  // every rank refuses alike
        return error("runs in one process (under mpirun: generate, logits, bench, chat and serve)");
    }
    auto options = tools::open_options(args);
    if (!options) return options.status();
    options->with_session = with_session;
    OpenFailure failure = OpenFailure::Options;
    auto opened = open_model(options.value(), &failure);
    if (!opened) {
        quiet_failure = failure == OpenFailure::Placement && launched_rank() != 0;
        // A file one machine lacks or holds damaged: each rank says which it is.
        if (failure == OpenFailure::File && launched_ranks() > 1) return error("rank " + std::to_string(launched_rank()) + ": " + opened.message());
        return opened.status();
    }
    if (opened->comm && opened->comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
        return error("rank " + std::to_string(opened->comm->rank()) + ": cannot silence stdout");
    return opened;
}

Result<LoadedInput> load_with_input(const tools::ModelArgs& args, const std::string& tokens, const std::string& prompt) {
    auto loaded = load(args);
    if (!loaded) return loaded.status();
    auto ids = tools::tokens_or_prompt(*loaded->model, tokens, prompt);
    if (!ids) return ids.status();
    COLIBRI_TRY(check_token_ids(*loaded->model, ids.value()));
    return LoadedInput{std::move(loaded.value()), std::move(ids.value())};
}

void print(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

}  // namespace colibri::cli
