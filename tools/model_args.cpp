#include "tools/model_args.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "tools/byte_size.h"
#include "tools/cache_sim.h"

namespace colibri::tools {

Result<std::optional<ExpertCacheRequest>> expert_cache_request(const ModelArgs& args) {
    if (args.ram_budget.empty()) {
        if (!args.hot_trace.empty()) return error("--hot-trace needs --ram-budget");
        if (args.cache_prefetch) return error("--cache-prefetch needs --ram-budget");
        return std::optional<ExpertCacheRequest>();
    }
    auto budget = parse_ram_budget(args.ram_budget);
    if (!budget) return error("--ram-budget: " + budget.message());
    const std::optional<CachePolicy> policy = parse_cache_policy(args.cache_policy);
    if (!policy) return error("--cache-policy: unknown policy '" + args.cache_policy + "' (lru, lfru or pinned)");
    ExpertCacheRequest request;
    request.budget = budget.value();
    request.policy = *policy;
    request.prefetch = args.cache_prefetch;
    if (*policy == CachePolicy::Pinned) {
        if (args.hot_trace.empty()) return error("--cache-policy pinned needs --hot-trace (a routing trace from route --json)");
        request.hot_experts = hot_experts_from_trace(args.hot_trace, "--hot-trace: ");
    } else if (!args.hot_trace.empty()) {
        return error("--hot-trace is for --cache-policy pinned");
    }
    return std::optional<ExpertCacheRequest>(std::move(request));
}

Result<OpenOptions> open_options(const ModelArgs& args, const SessionOptions& session) {
    auto cache = expert_cache_request(args);
    if (!cache) return cache.status();
    OpenOptions o;
    o.path = args.path;
    o.threads = args.threads;
    o.context = args.context;
    o.cache = std::move(cache.value());
    o.session = session;
    o.session.mtp = o.session.mtp || args.mtp;
    if (args.ranks) {
        if (!(args.rank_timeout_s > 0 && args.rank_timeout_s <= 86400)) return error("--rank-timeout must be in (0, 86400] seconds");
        o.ranks = RankRequest{args.placement, std::chrono::milliseconds(static_cast<int64_t>(args.rank_timeout_s * 1000)), nullptr};
    }
    return o;
}

Result<std::vector<int32_t>> parse_token_ids(const std::string& text) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t comma = text.find(',', pos);
        const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        char* end = nullptr;
        errno = 0;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
            return error("'" + item + "' is not a token id");
        ids.push_back(static_cast<int32_t>(v));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (ids.empty()) return error("no token ids given");
    return ids;
}

Result<std::vector<int32_t>> tokens_or_prompt(const Model& model, const std::string& tokens, const std::string& prompt) {
    if (!tokens.empty()) return parse_token_ids(tokens);
    if (prompt.empty()) return error("give --tokens or --prompt");
    if (model.tokenizer() == nullptr) return error("model has no tokenizer; use --tokens");
    auto ids = model.tokenizer()->encode(prompt, true);
    if (ids && ids->empty()) return error("prompt encodes to no tokens");
    return ids;
}

}  // namespace colibri::tools
