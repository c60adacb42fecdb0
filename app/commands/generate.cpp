// `colibri generate`: tokens from a prompt, streamed as text (or --json with timings and storage reads).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/sampler.h"
#include "engine/text/utf8.h"
#include "model_options.h"
#include "tools/model_summary.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

// Bytes this process (all its threads) has caused to be read from storage: /proc/self/io's read_bytes, which
// counts page faults on the mapping and the expert cache's reads alike; nullopt where the kernel keeps no I/O
// accounting. (Page-cache hits are not storage reads, which is the point: it says what a budget costs in I/O.)
std::optional<uint64_t> storage_read_bytes() {
    std::ifstream io("/proc/self/io");
    std::string key;
    uint64_t value = 0;
    while (io >> key >> value)
        if (key == "read_bytes:") return value;
    return std::nullopt;
}

json speculation_json(const std::string& mode, const SpeculationStats& s, uint32_t experts_active) {
    json j{{"mode", mode}, {"drafted", s.drafted}, {"accepted", s.accepted}, {"acceptance", s.acceptance()},
           {"passes", s.passes}, {"checks", s.checks}, {"tokens_per_pass", s.tokens_per_pass()}, {"tokens_per_check", s.tokens_per_check()}};
    if (s.check_layers > 0) j["experts_per_layer"] = {{"check", s.experts_per_check_layer()}, {"token", experts_active}};
    return j;
}

int cmd_generate(const CLI::App& cmd, const tools::ModelArgs& args, const std::string& tokens, const std::string& prompt, int n,
                 const SamplerConfig& sc, const std::string& speculate, bool report_speculation, bool as_json) {
    if (const std::string p = sampler_config_problem(sc); !p.empty()) return fail("generate", p);
    auto mode = parse_speculate_mode(speculate);
    if (!mode) return fail("generate", mode.message());
    tools::ModelArgs with_head = args;
    with_head.mtp = mode.value() == SpeculateMode::Mtp;  // the session runs the head beside the model
    auto loaded = load_with_input(with_head, tokens, prompt);
    if (!loaded) return fail("generate", loaded.message());
    OpenedModel& l = loaded->l;
    auto drafter = make_drafter(mode.value(), *l.model);
    if (!drafter) return fail("generate", drafter.message());
    const std::vector<int32_t>& ids = loaded->ids;
    Sampler sampler(sampler_for_model(cmd, sc, *l.model));
    GenerateRequest req;
    req.max_tokens = n;
    SpeculationStats speculation;
    req.drafter = drafter->get();
    req.speculation = &speculation;
    // With explicit token ids the caller decides when to stop, as HF generate with a fixed length does.
    if (tokens.empty()) req.stop_ids = default_stop_ids(*l.model);
    const Tokenizer* tok = l.model->tokenizer();
    Utf8Stream stream;
    GenerateStop stop = GenerateStop::MaxTokens;
    // Timing and storage reads: the prompt (to the first new token) and the decode after it, apart, so that a
    // budgeted run's cost per decoded token can be read off (bench/scripts/bench_ram_budget.py).
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    const std::optional<uint64_t> read0 = storage_read_bytes();
    Clock::time_point t_first = t0;
    std::optional<uint64_t> read_first;
    size_t produced = 0;
    auto out = generate(*l.session, sampler, ids, req, [&](int32_t id) {
        if (produced++ == 0) {
            t_first = Clock::now();
            read_first = storage_read_bytes();
        }
        if (!as_json && tok) print(stream.push(tok->decode_token_bytes(id)));
        return true;
    }, &stop);
    const Clock::time_point t_end = Clock::now();
    const std::optional<uint64_t> read_end = storage_read_bytes();
    if (!as_json && tok) print(stream.flush());
    if (!out) return fail("generate", out.message());
    if (as_json) {
        json j{{"prompt_ids", ids}, {"new_ids", out.value()},
               {"stop", stop == GenerateStop::StopToken ? "stop_token" : stop == GenerateStop::ContextFull ? "context_full" : "max_tokens"}};
        // The decode is every step after the first new token (which the prompt's evaluation produced).
        const auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
        const double decode_s = produced > 1 ? secs(t_first, t_end) : 0.0;
        j["timing"] = {{"prompt_s", produced ? secs(t0, t_first) : secs(t0, t_end)},
                       {"decode_s", decode_s},
                       {"decode_tokens", produced > 1 ? produced - 1 : 0},
                       {"decode_tokens_per_s", decode_s > 0 ? double(produced - 1) / decode_s : 0.0}};
        if (read0 && read_first && read_end)
            j["storage_read_bytes"] = {{"prompt", *read_first - *read0}, {"decode", *read_end - *read_first}};
        if (tok) j["text"] = tok->decode(out.value());
        if (req.drafter) j["speculation"] = speculation_json(speculate, speculation, l.model->hparams().n_experts_active);
        if (const ExpertCache* c = l.model->expert_cache()) j["expert_cache"] = tools::expert_cache_json(*c);
        j["ranks"] = l.comm ? l.comm->size() : 1;
        if (l.parallel) {  // this rank's MoE exchanges over the whole run
            const ExchangeStats& e = l.session->exchange_stats();
            j["exchange"] = {{"exchanges", e.exchanges}, {"bytes_sent", e.bytes_sent}, {"bytes_received", e.bytes_received},
                             {"exchange_s", double(e.wait_ns) * 1e-9}};
        }
        std::printf("%s\n", j.dump().c_str());
    } else if (!tok) {
        for (size_t i = 0; i < out->size(); ++i) std::printf("%s%d", i ? "," : "", out.value()[i]);
        std::printf("\n");
    } else {
        std::printf("\n");
    }
    if (!as_json && req.drafter && report_speculation)
        std::fprintf(stderr, "%s\n", speculation_summary(mode.value(), speculation, l.model->hparams().n_experts_active).c_str());
    // Not an error: what was generated stands, and the user learns why it ended before -n tokens.
    if (stop == GenerateStop::ContextFull)
        std::fprintf(stderr, "colibri: generate: stopped after %zu tokens: the context of %u tokens is full (-c sets it)\n",
                     out->size(), l.session->context());
    return 0;
}

class Generate final : public Command {
public:
    explicit Generate(CLI::App& app) {
        sub_ = app.add_subcommand("generate", "generate tokens");
        add_model_args(sub_, args_, true);
        add_rank_args(sub_, args_);
        add_input_args(sub_, tokens_, prompt_);
        sub_->add_option("-n", n_, "tokens to generate");
        add_sampler_args(sub_, sampler_);
        speculate_option_ = add_speculate_arg(sub_, speculate_);
        sub_->add_flag("--json", as_json_, "JSON output");
    }
    int run() override { return cmd_generate(*sub_, args_, tokens_, prompt_, n_, sampler_, speculate_, speculate_option_->count() > 0, as_json_); }

private:
    tools::ModelArgs args_;
    std::string tokens_, prompt_;
    int n_ = 32;
    SamplerConfig sampler_;
    std::string speculate_ = "off";  // off until measured to pay (docs/PERFORMANCE.md, speculative decoding)
    CLI::Option* speculate_option_ = nullptr;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> generate_command(CLI::App& app) { return std::make_unique<Generate>(app); }

}  // namespace colibri::cli
