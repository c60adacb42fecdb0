// The one way a front end opens a model with options (the CLI's commands, `colibri serve` and `bench`, the Studio,
// the C API): load the file, check the context, put the routed experts behind a RAM budget when asked, start the
// thread pool and a session. Each step's error is worded once, here or in what it calls.
#pragma once
#include <cstdint>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/cache/expert_slots.h"
#include "engine/cache/ram_budget.h"
#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/expert_parallel.h"

namespace colibri {

// The pinned policy's hot experts per layer index, learned from the model once it is loaded (a routing trace
// read by tools::hot_experts_from_trace, or a test's own list).
using HotExpertSource = std::function<Result<std::vector<std::vector<uint32_t>>>(const Model&)>;

// The expert cache a model opens with (engine/cache/expert_cache.h): models larger than RAM.
struct ExpertCacheRequest {
    RamBudget budget;
    CachePolicy policy = CachePolicy::Lru;
    HotExpertSource hot_experts;  // required by CachePolicy::Pinned, refused by the others
    bool prefetch = false;        // read the next MoE layer's predicted experts ahead of use
};

// Expert parallelism (engine/distributed/): the ranks mpirun started, each computing its experts of every MoE layer.
struct RankRequest {
    std::string placement;  // --placement's JSON file; empty: round-robin
    std::chrono::milliseconds wait_limit{60000};  // how long an exchange waits for the other ranks
    Communicator* comm = nullptr;  // null: from the environment (MPI under mpirun, else one process)
};

struct OpenOptions {
    std::string path;
    uint32_t context = 0;  // session positions; 0: min(model, 4096)
    unsigned threads = 0;  // 0: all cores
    std::optional<ExpertCacheRequest> cache;  // none: the whole model mapped
    // false: the model alone, checked against `context` (a server's scheduler starts its own pool and sessions).
    bool with_session = true;
    SessionOptions session = SessionOptions::from_environment();
    std::optional<RankRequest> ranks;  // none: one process, whatever launched it
};

struct OpenedModel {
    // First, so that they outlive the sessions (and MPI is finalized last); null in one process.
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<ExpertParallel> parallel;
    std::unique_ptr<Model> model;
    std::unique_ptr<ThreadPool> pool;   // null without with_session
    std::unique_ptr<Session> session;   // null without with_session
};

// What a failure was about, for a front end that tells the file's problems apart from the options' (the Studio).
// Placement: a --placement every rank refuses alike (the CLI lets rank 0 alone say so).
enum class OpenFailure { File, Options, Placement };

// Loads options.path and checks it against the options; the session is on options.context with options.session.
Result<OpenedModel> open_model(const OpenOptions& options, OpenFailure* failure = nullptr);
// The steps of open_model, for front ends that hold a model and sessions apart (the C API, bench's cold starts).
Result<std::unique_ptr<Model>> load_model(const OpenOptions& options, OpenFailure* failure = nullptr);
// Joins the ranks of `comm` (when there are several): the placement of `request` read and checked against the
// model, every rank's model and placement compared, the model's experts spread (Model::set_expert_parallel, to the
// returned ExpertParallel, which must outlive the model's sessions; null in one process). Before any session.
Result<std::unique_ptr<ExpertParallel>> join_ranks(Model& model, Communicator& comm, const RankRequest& request,
                                                   OpenFailure* failure = nullptr);
Status use_expert_cache(Model& model, const ExpertCacheRequest& request);
struct SessionParts {
    std::unique_ptr<ThreadPool> pool;
    std::unique_ptr<Session> session;
};
Result<SessionParts> open_session(const Model& model, unsigned threads, uint32_t context, const SessionOptions& options);

}  // namespace colibri
