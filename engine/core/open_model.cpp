#include "engine/core/open_model.h"

#include <algorithm>
#include <cmath>

#include "engine/distributed/launch.h"

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

Result<std::unique_ptr<ExpertParallel>> join_ranks(Model& model, Communicator& comm, const RankRequest& request, OpenFailure* failure) {
    const auto fail = [failure](OpenFailure what, Status s) {
        if (failure) *failure = what;
        return s;
    };
    comm.set_wait_limit(request.wait_limit);
    if (comm.size() <= 1) {
        if (!request.placement.empty()) return fail(OpenFailure::Options, error("--placement: this is one process (start the ranks with mpirun -np N)"));
        return std::unique_ptr<ExpertParallel>();
    }
    if (comm.size() > ExpertPlacement::kMaxRanks)
        return fail(OpenFailure::Options, error(std::to_string(comm.size()) + " ranks: at most " + std::to_string(ExpertPlacement::kMaxRanks)));
    const PlacementShape shape = model.placement_shape();
    auto placement = request.placement.empty() ? Result<ExpertPlacement>(ExpertPlacement::round_robin(comm.size(), shape))
                                               : ExpertPlacement::read(request.placement, comm.size(), shape);
    if (!placement) {
        (void)agree_before_start(comm, model.fingerprint(), nullptr);  // the other ranks stop too
        return fail(OpenFailure::Placement, error("--placement " + placement.message()));
    }
    COLIBRI_TRY(agree_before_start(comm, model.fingerprint(), &placement.value()));
    auto parallel = std::make_unique<ExpertParallel>(ExpertParallel{&comm, std::move(placement.value())});
    model.set_expert_parallel(parallel.get());
    return parallel;
}

Result<OpenedModel> open_model(const OpenOptions& options, OpenFailure* failure) {
    OpenedModel opened;
    if (options.ranks && options.ranks->comm == nullptr) {  // MPI starts before anything can fail, as every rank must
        auto made = communicator_from_environment();
        if (!made) return made.status();
        opened.comm = std::move(made.value());
    }
    auto model = load_model(options, failure);
    if (!model) {
        if (options.ranks) {  // the other ranks stop too
            Communicator& comm = options.ranks->comm ? *options.ranks->comm : *opened.comm;
            if (comm.size() > 1) (void)agree_before_start(comm, 0, nullptr);
        }
        return model.status();
    }
    opened.model = std::move(model.value());
    if (options.ranks) {
        Communicator& comm = options.ranks->comm ? *options.ranks->comm : *opened.comm;
        auto parallel = join_ranks(*opened.model, comm, *options.ranks, failure);
        if (!parallel) return parallel.status();
        opened.parallel = std::move(parallel.value());
    }
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
