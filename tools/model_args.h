// The model options every command that loads a model takes (-m, -t, -c, --ram-budget, --cache-policy,
// --hot-trace, --cache-prefetch), as typed, and what they ask open_model (engine/core/open_model.h) for.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/open_model.h"

namespace colibri::tools {

struct ModelArgs {
    std::string path;
    unsigned threads = 0;
    uint32_t context = 0;
    std::string ram_budget;            // empty: the whole model mapped; a size (6G) or a share of the file (50%)
    std::string cache_policy = "lru";  // with --ram-budget
    std::string hot_trace;             // pinned: the routing trace the hot set is learned from
    bool cache_prefetch = false;       // read the next MoE layer's predicted experts ahead of use
    bool mtp = false;                  // run the model's multi-token-prediction head (--speculate mtp)
    // Expert parallelism under mpirun (generate, logits, bench, chat, serve): the command spreads the experts over the ranks.
    bool ranks = false;
    std::string placement;             // --placement FILE; empty: round-robin
    double rank_timeout_s = 60;        // --rank-timeout: how long an exchange waits for the other ranks
};

// The expert cache the budget options ask for; nullopt without --ram-budget. Errors name the option.
Result<std::optional<ExpertCacheRequest>> expert_cache_request(const ModelArgs& args);
// open_model's options for these arguments, the session's from `session`.
Result<OpenOptions> open_options(const ModelArgs& args, const SessionOptions& session = SessionOptions::from_environment());

// --tokens: comma-separated ids in [0, 2^31); errors quote the item that is not one.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text);
// The input of a command that takes --tokens or --prompt: the ids, or the prompt through the model's tokenizer
// (with its BOS). Not yet checked against the vocabulary (check_token_ids).
Result<std::vector<int32_t>> tokens_or_prompt(const Model& model, const std::string& tokens, const std::string& prompt);

}  // namespace colibri::tools
