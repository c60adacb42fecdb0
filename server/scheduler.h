// The server's engine: N slots, each a Session with its own KV cache, and one engine thread that advances every
// active slot by one step at a time. A step gathers each slot's input (a prompt chunk, or the token its reply
// just sampled) and runs them through the model in one forward pass (Session::eval_batch); new requests take free slots between steps,
// so a long reply never holds up a short one. A cancelled job leaves at the next step; the others go on.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/model.h"
#include "engine/core/session.h"
#include "engine/core/thread_pool.h"
#include "engine/core/session_mirror.h"
#include "server/job.h"

namespace colibri::server {

struct SchedulerOptions {
    uint32_t slots = 4;         // sequences that decode together
    uint32_t context = 0;       // per slot; 0: min(model, 4096)
    unsigned threads = 0;       // 0: all cores
    uint32_t max_queue = 64;    // requests waiting for a slot; more are refused
    uint32_t prefill_chunk = 64;  // prompt tokens a slot evaluates per step, so that decoding slots keep pace
    // A slot's cached prefix serves requests of any JobSpec::cache_scope (API key); by default only its own.
    bool share_cache_across_scopes = false;
    // Expert parallelism: the ranks (null or one: this process alone). On rank 0 the slots' sessions tell the other
    // ranks every operation on them (engine/core/session_mirror.h, slot i as i); they run follow_scheduler.
    Communicator* ranks = nullptr;
    // Called once on the engine thread when a rank is lost: every job has failed and the scheduler takes no more
    // (lost() says why).
    std::function<void()> on_ranks_lost;
};

struct SchedulerStats {
    uint64_t admitted = 0, completed = 0, cancelled = 0, failed = 0;
    uint64_t prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
    uint64_t steps = 0;
    uint64_t forward_passes = 0, batched_tokens = 0;  // eval_batch calls and the tokens they evaluated together
    uint64_t drafted = 0, accepted = 0;  // speculative decoding: draft tokens checked, and those the sampler kept
    uint32_t queued = 0, active = 0, slots = 0;
    uint32_t ranks = 1;  // processes that share the experts (expert parallelism)
    double decode_tokens_per_second = 0.0;  // generated tokens over the last 10 s (or since the first token), at the time asked
    uint32_t layers = 0, experts = 0;
    std::vector<uint64_t> expert_activations;  // [layer][expert]: routed tokens (prompt and generated)
};

class Scheduler {
public:
    Scheduler(const Model& model, const SchedulerOptions& options);
    ~Scheduler();  // finishes every job (with an error) and stops the engine thread
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Queues a job; false when max_queue jobs are already waiting (the job is not touched).
    bool submit(std::shared_ptr<Job> job);
    SchedulerStats stats() const;
    uint32_t context() const { return context_; }
    const Model& model() const { return model_; }
    // Ok unless a rank stopped answering (then the server can only stop: the error names the rank where known).
    Status lost() const;

private:
    struct Slot;
    void run();
    // Every job, running or queued, ends with `why`.
    void fail_all(const std::string& why);
    void admit_locked();
    void step();
    void finish(Slot& slot, FinishReason reason, const std::string& error = {});
    // A decoding slot's part of a step: samples (from a running check's rows while its drafts are right), and
    // queues the token to evaluate next, with drafts after it when the slot speculates. False: the reply ended.
    struct Input;
    bool decode(Slot& slot, std::vector<Input>& inputs, uint32_t& sampled, uint32_t& accepted);

    const Model& model_;
    SchedulerOptions options_;
    uint32_t context_ = 0;
    std::unique_ptr<ThreadPool> pool_;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Session::BatchPart> batch_;  // the engine thread's, reused every step
    SessionMirror mirror_;  // the slots' sessions tell it each operation; the engine thread sends idle and stop

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool stopping_ = false;
    Status lost_;  // guarded by mutex_
    SchedulerStats stats_;                               // guarded by mutex_
    std::deque<std::pair<double, uint32_t>> recent_;     // (seconds, tokens) of recent steps, guarded by mutex_
    std::vector<std::atomic<uint64_t>> expert_counts_;   // [layer][expert], bumped by the engine thread
    std::thread thread_;
};

// A rank other than 0 behind rank 0's Scheduler: the same slot sessions (options' slots, context and threads), each
// operation rank 0's mirror sends applied to them, until it says stop (ok) or stops answering (the error).
Status follow_scheduler(const Model& model, const SchedulerOptions& options);

}  // namespace colibri::server
