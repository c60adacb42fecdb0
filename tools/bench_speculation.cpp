#include "tools/bench_speculation.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/core/chat_prompt.h"
#include "engine/core/generate.h"
#include "engine/core/sampler.h"

namespace colibri::tools {

namespace {

using nlohmann::json;

// The request: the text, then an edit to make while repeating it (the reply quotes the text nearly whole).
Result<std::vector<int32_t>> workload(const Model& model, const SpeculationBenchConfig& config) {
    const Tokenizer* tok = model.tokenizer();
    if (tok == nullptr) return error("--speculate: the model has no tokenizer for the workload's text");
    std::ifstream in(config.text_path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    if (!in) return error("--speculate-text " + config.text_path + ": cannot read it");
    std::string text = buffer.str();
    // The first text_tokens tokens' worth of text (cut at a line end).
    auto ids = tok->encode(text, false);
    if (!ids) return ids.status();
    if (ids->size() > config.text_tokens) {
        size_t bytes = 0;
        for (size_t i = 0; i < config.text_tokens; ++i) bytes += tok->decode_token_bytes(ids.value()[i]).size();
        text.resize(std::min(bytes, text.size()));
        if (const size_t nl = text.rfind('\n'); nl != std::string::npos && nl > text.size() / 2) text.resize(nl + 1);
    }
    if (text.empty()) return error("--speculate-text " + config.text_path + ": the file is empty");
    const std::vector<ChatMessage> messages{
        {"user", "Here is the start of a document:\n\n" + text +
                     "\nRepeat the document exactly, but replace every occurrence of \"software\" with \"program\". Then summarise it in two sentences."}};
    return chat_prompt_ids(model, messages);
}

struct Run {
    std::vector<int32_t> ids;
    double tps = 0;
    SpeculationStats stats;
};

Result<Run> run_once(Session& session, std::span<const int32_t> prompt, uint32_t decode_tokens, Drafter* drafter) {
    using Clock = std::chrono::steady_clock;
    session.reset();
    if (drafter) drafter->reset();
    Sampler sampler(SamplerConfig{.greedy = true});
    GenerateRequest req;
    req.max_tokens = static_cast<int32_t>(decode_tokens);
    req.drafter = drafter;
    Run run;
    req.speculation = &run.stats;
    Clock::time_point first;
    size_t produced = 0;
    auto out = generate(session, sampler, prompt, req, [&](int32_t) {
        if (produced++ == 0) first = Clock::now();
        return true;
    });
    if (!out) return out.status();
    const double seconds = std::chrono::duration<double>(Clock::now() - first).count();
    run.ids = std::move(out.value());
    run.tps = produced > 1 && seconds > 0 ? double(produced - 1) / seconds : 0.0;
    return run;
}

}  // namespace

Result<SpeculationBench> bench_speculation(const Model& model, ThreadPool& pool, const SessionOptions& options,
                                           const SpeculationBenchConfig& config) {
    auto prompt = workload(model, config);
    if (!prompt) return prompt.status();
    auto drafter = make_drafter(config.mode, model);
    if (!drafter) return drafter.status();
    if (drafter.value() == nullptr) return error("--speculate off: nothing to compare");
    // Plain decoding runs without the MTP head (what --speculate off costs); the drafted runs with it for mtp.
    const uint32_t context = static_cast<uint32_t>(prompt->size()) + config.decode_tokens + 1;
    SessionOptions plain_options = options, drafted_options = options;
    plain_options.mtp = false;
    drafted_options.mtp = config.mode == SpeculateMode::Mtp;
    Session plain_session(model, pool, context, plain_options), session(model, pool, context, drafted_options);
    SpeculationBench b;
    b.mode = config.mode;
    b.text_path = config.text_path;
    b.prompt_tokens = static_cast<uint32_t>(prompt->size());
    b.decode_tokens = config.decode_tokens;
    b.experts_active = model.hparams().n_experts_active;
    std::vector<double> plain, spec;
    std::vector<int32_t> expected;
    for (uint32_t r = 0; r <= config.reps; ++r) {  // rep 0 warms up; plain and speculative alternate
        auto p = run_once(plain_session, prompt.value(), config.decode_tokens, nullptr);
        if (!p) return p.status();
        auto s = run_once(session, prompt.value(), config.decode_tokens, drafter->get());
        if (!s) return s.status();
        if (r == 0) expected = p->ids;
        b.identical = b.identical && p->ids == expected && s->ids == expected;
        if (r == 0) continue;
        plain.push_back(p->tps);
        spec.push_back(s->tps);
        b.stats += s->stats;
    }
    b.plain_tps = Spread::of(plain);
    b.speculative_tps = Spread::of(spec);
    return b;
}

json speculation_bench_json(const SpeculationBench& b) {
    const SpeculationStats& s = b.stats;
    json j{{"mode", speculate_mode_name(b.mode)},
           {"text", b.text_path},
           {"prompt_tokens", b.prompt_tokens},
           {"decode_tokens", b.decode_tokens},
           {"plain_tok_s", {{"median", b.plain_tps.median}, {"min", b.plain_tps.min}, {"max", b.plain_tps.max}, {"samples", b.plain_tps.samples}}},
           {"speculative_tok_s",
            {{"median", b.speculative_tps.median}, {"min", b.speculative_tps.min}, {"max", b.speculative_tps.max}, {"samples", b.speculative_tps.samples}}},
           {"speedup", b.speedup()},
           {"identical", b.identical},
           {"drafted", s.drafted},
           {"accepted", s.accepted},
           {"acceptance", s.acceptance()},
           {"tokens_per_pass", s.tokens_per_pass()},
           {"tokens_per_check", s.tokens_per_check()}};
    if (s.check_layers > 0) j["experts_per_layer"] = {{"check", s.experts_per_check_layer()}, {"token", b.experts_active}};
    return j;
}

std::string speculation_bench_text(const SpeculationBench& b) {
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "speculation (%s), summarise-and-edit of %s (%u prompt tokens, %u decoded, greedy): %.2f tok/s "
                  "median vs %.2f plain (%.2fx)%s\n  %s\n",
                  speculate_mode_name(b.mode), b.text_path.c_str(), b.prompt_tokens, b.decode_tokens, b.speculative_tps.median,
                  b.plain_tps.median, b.speedup(), b.identical ? "" : "; OUTPUT DIFFERS FROM PLAIN DECODING",
                  speculation_summary(b.mode, b.stats, b.experts_active).c_str());
    return buf;
}

}  // namespace colibri::tools
