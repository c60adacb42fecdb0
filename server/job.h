// A generation request inside the server: what to generate (JobSpec), and the channel its tokens travel from
// the engine thread to whoever answers the client (JobSink). The scheduler owns the engine thread; a front
// end (HTTP, the local socket) submits a Job and consumes its events.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/chat_service.h"
#include "engine/core/sampler.h"

namespace colibri::server {

struct JobSpec {
    std::vector<int32_t> prompt;  // the whole conversation's tokens
    SamplerConfig sampling;
    ReplyOptions reply;
    bool trace = false;  // attach each token's routing and timings (the Studio's remote mode)
    // A slot's cached prompt prefix serves only requests of the same scope (the API key, server/api_keys.h).
    uint32_t cache_scope = 0;
    // Speculative decoding (engine/core/speculation.h): the same reply in fewer passes when drafts are right.
    SpeculateMode speculate = SpeculateMode::Off;
};

// The routing and timings of one evaluated position, for the trace extension (docs/SERVER.md).
struct PositionTrace {
    uint32_t position = 0;
    int32_t token = -1;
    struct Layer {
        uint32_t layer = 0;
        std::vector<int32_t> experts;
        std::vector<float> weights;
        std::vector<float> probs;
    };
    std::vector<Layer> routing;  // MoE layers
    struct Timing {
        uint32_t layer = 0;
        uint64_t attention_ns = 0, router_ns = 0, experts_ns = 0;
    };
    std::vector<Timing> timings;  // every layer
    // Across ranks (mpirun -np N serve), per MoE layer: each rank's expert time, rank 0's exchange and its bytes
    // (engine/core/trace.h RankTiming); empty in one process.
    struct Ranks {
        uint32_t layer = 0;
        std::vector<uint64_t> experts_ns;  // per rank
        uint64_t exchange_ns = 0, bytes = 0, bytes_sent = 0, bytes_received = 0;
    };
    std::vector<Ranks> ranks;
};

struct JobEvent {
    TokenEvent token;
    std::vector<PositionTrace> traces;  // positions evaluated since the previous event (trace requested)
};

struct JobOutcome {
    FinishReason finish = FinishReason::None;
    std::string error;  // non-empty: the engine failed (the request ends with an error)
    uint32_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
    double prompt_ms = 0.0, decode_ms = 0.0;  // time from admission to the first token, and after it
    double queued_ms = 0.0;                   // time waiting for a slot
    std::vector<PositionTrace> traces;        // trace positions after the last token event
};

// Receives a job's events on the engine thread. Must not block: the engine thread serves every slot.
class JobSink {
public:
    virtual ~JobSink() = default;
    virtual void on_event(JobEvent&& event) = 0;
    virtual void on_finish(JobOutcome&& outcome) = 0;
};

// A sink that queues events for another thread to take (the HTTP handler's thread).
class JobQueue final : public JobSink {
public:
    void on_event(JobEvent&& event) override {
        {
            std::lock_guard lock(mutex_);
            events_.push_back(std::move(event));
        }
        ready_.notify_one();
    }
    void on_finish(JobOutcome&& outcome) override {
        {
            std::lock_guard lock(mutex_);
            outcome_ = std::move(outcome);
        }
        ready_.notify_one();
    }
    // Waits up to `timeout` for events or the end; moves the queued events into `out`. Returns the outcome
    // once the job is over and every event was taken.
    std::optional<JobOutcome> take(std::vector<JobEvent>& out, std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !events_.empty() || outcome_.has_value(); });
        out.clear();
        while (!events_.empty()) {
            out.push_back(std::move(events_.front()));
            events_.pop_front();
        }
        return outcome_;
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<JobEvent> events_;
    std::optional<JobOutcome> outcome_;
};

class Job {
public:
    // The job keeps its sink alive: the engine may still report to it after the client went away.
    Job(JobSpec spec, std::shared_ptr<JobSink> sink) : spec_(std::move(spec)), sink_(std::move(sink)) {}
    const JobSpec& spec() const { return spec_; }
    JobSink& sink() { return *sink_; }
    // Any thread: the engine drops the job before its next step (a client that went away).
    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
    std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();

private:
    JobSpec spec_;
    std::shared_ptr<JobSink> sink_;
    std::atomic<bool> cancelled_{false};
};

}  // namespace colibri::server
