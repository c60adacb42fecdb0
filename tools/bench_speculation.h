// `colibri bench --speculate MODE`: decode tokens/s with and without speculative decoding on a workload that can
// gain from it: a summarise-and-edit request on real text (by default a licence every Debian system ships), whose
// reply quotes the text. Plain and speculative runs alternate (rep 0 of each warms up), greedy, from a fresh
// session each; their ids must agree. Statistics: acceptance, tokens per pass, experts read per MoE layer.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "engine/base/status.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/speculation.h"
#include "tools/bench.h"

namespace colibri::tools {

inline constexpr const char* kSpeculationText = "/usr/share/common-licenses/GPL-3";

struct SpeculationBenchConfig {
    SpeculateMode mode = SpeculateMode::Off;
    std::string text_path = kSpeculationText;
    uint32_t text_tokens = 384;  // of the text, at most (the request's wording comes on top)
    uint32_t decode_tokens = 128;
    uint32_t reps = 5;
};

struct SpeculationBench {
    SpeculateMode mode = SpeculateMode::Off;
    std::string text_path;
    uint32_t prompt_tokens = 0, decode_tokens = 0;
    Spread plain_tps, speculative_tps;  // decode tokens/s (after the first token, which the prompt gives)
    SpeculationStats stats;             // of the timed speculative runs together
    uint32_t experts_active = 0;
    bool identical = true;              // every run's ids equal the plain ones
    double speedup() const { return plain_tps.median > 0 ? speculative_tps.median / plain_tps.median : 0.0; }
};

// On a model with a tokenizer; sessions of its own on `pool` with `options`.
Result<SpeculationBench> bench_speculation(const Model& model, ThreadPool& pool, const SessionOptions& options,
                                           const SpeculationBenchConfig& config);
nlohmann::json speculation_bench_json(const SpeculationBench& b);
std::string speculation_bench_text(const SpeculationBench& b);

}  // namespace colibri::tools
