#include "tools/model_args.h"

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
    return o;
}

}  // namespace colibri::tools
