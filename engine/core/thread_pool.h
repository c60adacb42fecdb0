// The engine's thread pool. Work is split into contiguous ranges, one per part, and every output element is
// produced by exactly one task. By default the ranges are equal, by a fixed rule that depends only on the item
// count and the thread count. Split::Balanced (for jobs whose every item is computed the same way whoever
// computes it, such as the rows of a matrix product) sizes the ranges by how fast each thread has been: on a
// shared host one vCPU often runs 5-45 % slower than the other for minutes, and with equal ranges the faster
// thread waits at every hand-off. Either way results never depend on timing or on the number of threads.
// COLIBRI_BALANCE=0 keeps every split equal (a fixed schedule, e.g. to compare per-thread profiles).
//
// Decode makes about forty hand-offs per token, each a few tens of microseconds of work. A sleeping thread
// takes long to wake: a futex round trip, and on a VM the host must reschedule the halted vCPU (measured
// 60-70 µs per hand-off on a 2-vCPU KVM guest, more than the work itself). So an idle worker first polls
// for the next job for a short while (spin_time(), COLIBRI_SPIN_US) and only then sleeps (std::atomic::wait,
// a futex on Linux); the caller polls for its workers the same way. Back-to-back jobs start within a cache
// line transfer, and an idle pool (a chat waiting for input) sleeps.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/base/status.h"

namespace colibri {

// A non-owning reference to a callable (void(size_t, size_t)): unlike std::function it never allocates,
// so the hot path can hand lambdas to the pool freely.
class RangeFn {
public:
    RangeFn() = default;
    template <typename F>
    RangeFn(const F& f) : object_(&f), call_([](const void* o, size_t b, size_t e) { (*static_cast<const F*>(o))(b, e); }) {}
    void operator()(size_t b, size_t e) const { call_(object_, b, e); }

private:
    const void* object_ = nullptr;
    void (*call_)(const void*, size_t, size_t) = nullptr;
};

class ThreadPool {
public:
    // threads 0 = hardware concurrency; spin: how long an idle thread polls before it sleeps (0: never).
    // Throws std::system_error when the system refuses a thread (a process or memory limit), after stopping the
    // ones it started; create() returns that as an error instead.
    explicit ThreadPool(unsigned threads, std::chrono::microseconds spin = default_spin_time());
    static Result<std::unique_ptr<ThreadPool>> create(unsigned threads, std::chrono::microseconds spin = default_spin_time());
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
    std::chrono::microseconds spin_time() const { return spin_; }

    // 300 µs (longer than the gaps between a token's hand-offs, far shorter than a human pause), or
    // COLIBRI_SPIN_US when set (0 makes idle threads sleep at once, as a plain condition-variable pool).
    static std::chrono::microseconds default_spin_time();
    // Whether Split::Balanced may size ranges by speed: yes unless COLIBRI_BALANCE is "0" (read per pool).
    static bool balancing_from_environment();

    enum class Split { Equal, Balanced };
    // Calls fn(begin, end) over [0, n) split into at most size() ranges; blocks until all are done.
    // Ranges shorter than min_chunk are merged so tiny jobs run on the calling thread alone. Split::Balanced:
    // ranges in proportion to each part's recent speed (items per second on earlier balanced jobs; equal until
    // measured, and for jobs of fewer than kBalancedMinItems items).
    // One caller at a time; fn must not call parallel_for on the same pool.
    void parallel_for(size_t n, size_t min_chunk, RangeFn fn, Split split = Split::Equal);

    // Part k's share of the next balanced job (for tests and tracing); 1 / size() each until measured.
    double balanced_share(unsigned part) const;
    static constexpr size_t kBalancedMinItems = 1 << 16;

private:
    void worker_loop(unsigned index);
    void stop_workers();
    static unsigned thread_count(unsigned requested);  // what a pool of `requested` threads (0: all cores) has
    // Range of part k of a job of n items in `parts` parts, by the job's rule.
    void range_of(size_t n, size_t parts, size_t k, bool balanced, size_t* begin, size_t* end) const;
    void learn_speeds(size_t parts);
    // Runs part `index` of the current job; returns the time it took when balanced (else 0): the caller's and
    // the workers' one path.
    uint64_t run_part(size_t index, size_t parts, size_t n, const RangeFn& fn, bool balanced) const;

    std::vector<std::thread> workers_;
    std::chrono::microseconds spin_;
    bool balancing_ = true;  // balancing_from_environment() at construction

    // A hand-off costs a few cache-line transfers between cores (on a 2-vCPU KVM guest a round trip between two
    // threads, two transfers, takes 0.63 µs), and decode makes about forty per token: so everything a worker
    // reads to start a job sits in one cache line that only the caller writes, and everything it reports sits
    // in a line of its own that only it writes (no shared counter, no false sharing). Timing hand-offs of empty
    // parts there: 0.92-1.07 µs (equal split) and 1.35-1.57 µs (balanced) with the job spread over several
    // lines and a shared count of parts left; 0.64-0.73 and 0.80-0.88 µs this way.
    //
    // A job is announced by one store to `generation`: a counter in the high bits and the job's part count in
    // the low kPartBits (0: the pool is stopping), so a worker learns from one load whether it takes part. The
    // other fields are written before that store (release) and read by the parts' workers after it (acquire);
    // the caller waits for those workers before it writes the next job, so they never see a torn one. A worker
    // that takes no part reads nothing else.
    static constexpr unsigned kPartBits = 16;
    static constexpr size_t kInlineBounds = 3;  // inner bounds of balanced jobs of up to 4 parts fit the line
    struct alignas(64) Job {
        std::atomic<uint64_t> generation{0};
        RangeFn fn;  // a copy: the caller's RangeFn lies in another line of its stack
        size_t n = 0;
        bool balanced = false;
        size_t inner[kInlineBounds] = {};  // balanced: part k is [bound(k), bound(k + 1)), bound(0) = 0, bound(parts) = n
    };
    // What worker k (part k) reports: how many jobs it has finished (a 32-bit word, which std::atomic waits on
    // with a futex directly; the caller counts the jobs it gave each worker in given_) and the time its part of
    // the last one took.
    struct alignas(64) Done {
        std::atomic<uint32_t> jobs{0};
        uint64_t ns = 0;
    };
    static_assert(sizeof(Job) == 64, "the job must fit one cache line");
    Job job_;
    std::vector<size_t> inner_overflow_;  // inner bounds for pools of more than kInlineBounds + 1 parts
    std::unique_ptr<Done[]> done_;        // index k - 1 for worker k (k = 1 .. size() - 1)
    std::vector<uint32_t> given_;         // index k - 1: jobs given to worker k (wraps, as Done::jobs does)
    std::vector<double> speed_;           // relative speed of part k (mean 1), smoothed over balanced jobs
    std::vector<uint64_t> part_ns_;       // the caller's copy of each part's time on the last balanced job
    // The current job's inner bounds: in the job line, or inner_overflow_ for pools of more parts.
    size_t* inner() { return inner_overflow_.empty() ? job_.inner : inner_overflow_.data(); }
    const size_t* inner() const { return inner_overflow_.empty() ? job_.inner : inner_overflow_.data(); }
    size_t bound(size_t k, size_t parts) const;
    // The generation word announcing a job of `parts` parts (0: stop) after the current one.
    uint64_t next_generation(size_t parts) const {
        return ((job_.generation.load(std::memory_order_relaxed) >> kPartBits) + 1) << kPartBits | parts;
    }
};

}  // namespace colibri
