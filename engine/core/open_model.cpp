#include "engine/core/open_model.h"

#include <algorithm>
#include <cmath>

namespace colibri {

Status use_expert_cache(Model& model, const ExpertCacheRequest& request) {
    ExpertCacheConfig config;
    config.ram_budget = request.budget.resolve(model.file().size());
    config.policy = request.policy;
    config.prefetch = request.prefetch;
    if (request.policy == CachePolicy::Pinned) {
        if (!request.hot_experts) return error("the pinned cache policy needs a routing trace to learn its hot experts from (colibri route --json)");
        auto hot = request.hot_experts(model);
        if (!hot) return hot.status();
        config.hot_experts = std::move(hot.value());
    } else if (request.hot_experts) {
        return error("a hot set is for the pinned cache policy only");
    }
    return model.use_expert_cache(config);
}

Result<std::unique_ptr<Model>> load_model(const OpenOptions& options, OpenFailure* failure) {
    const auto fail = [failure](OpenFailure what, Status s) {
        if (failure) *failure = what;
        return s;
    };
    if (options.path.empty()) return fail(OpenFailure::Options, error("no model given (use -m model.bin)"));
    auto model = Model::load(options.path);
    if (!model) return fail(OpenFailure::File, model.status());
    if (Status s = check_context(*model.value(), options.context); !s) return fail(OpenFailure::Options, s);
    if (options.cache)
        if (Status s = use_expert_cache(*model.value(), *options.cache); !s) return fail(OpenFailure::Options, s);
    return std::move(model.value());
}

Result<SessionParts> open_session(const Model& model, unsigned threads, uint32_t context, const SessionOptions& options) {
    COLIBRI_TRY(check_context(model, context));
    auto pool = ThreadPool::create(threads);
    if (!pool) return pool.status();
    SessionParts parts;
    parts.pool = std::move(pool.value());
    parts.session = std::make_unique<Session>(model, *parts.pool, context, options);
    return parts;
}

Result<OpenedModel> open_model(const OpenOptions& options, OpenFailure* failure) {
    auto model = load_model(options, failure);
    if (!model) return model.status();
    OpenedModel opened;
    opened.model = std::move(model.value());
    if (!options.with_session) return opened;
    auto parts = open_session(*opened.model, options.threads, options.context, options.session);
    if (!parts) {
        if (failure) *failure = OpenFailure::Options;
        return parts.status();
    }
    opened.pool = std::move(parts->pool);
    opened.session = std::move(parts->session);
    return opened;
}

}  // namespace colibri
