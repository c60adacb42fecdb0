// The engine's thread pool. A job over [0, n) is cut into chunks at boundaries that depend only on n, the
// minimum chunk and the pool size; threads claim chunks from a shared counter, and every output element is
// produced by exactly one fn(begin, end) call, so results never depend on timing, on which thread ran a
// chunk, or on the number of threads (the callers' outputs are per element, never per range).
//
// Decode makes dozens of hand-offs per token, each only tens of microseconds of work, so a condition
// variable's wake-up latency (a futex round trip, worse on a loaded VM) would cost a noticeable share of a
// token. Workers therefore spin on the job counter for a short while after each job (kSpinNs) and only then
// sleep on it (std::atomic::wait, a futex on Linux): back-to-back jobs start within a cache-line transfer,
// and an idle pool (a chat waiting for input) sleeps.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace colibri {

// A non-owning reference to a callable (void(size_t, size_t)): unlike std::function it never allocates,
// so the hot path can hand lambdas to the pool freely.
class RangeFn {
public:
    template <typename F>
    RangeFn(const F& f) : object_(&f), call_([](const void* o, size_t b, size_t e) { (*static_cast<const F*>(o))(b, e); }) {}
    void operator()(size_t b, size_t e) const { call_(object_, b, e); }

private:
    const void* object_;
    void (*call_)(const void*, size_t, size_t);
};

class ThreadPool {
public:
    explicit ThreadPool(unsigned threads);  // 0 = hardware concurrency
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Calls fn(begin, end) over [0, n), cut into chunks of at least min_chunk items (at most a few per
    // thread); blocks until all are done. Jobs too small to split run on the calling thread alone.
    // Not reentrant: fn must not call parallel_for on the same pool.
    void parallel_for(size_t n, size_t min_chunk, RangeFn fn);

    // Chunks a job of n items is cut into (exposed for tests).
    size_t chunk_count(size_t n, size_t min_chunk) const;

private:
    void worker_loop();
    void run_chunks();

    std::vector<std::thread> workers_;
    // The current job; written by the caller before it bumps generation_, read by workers after.
    const RangeFn* job_ = nullptr;
    size_t job_n_ = 0, job_chunks_ = 0;
    alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job; workers wait on it
    alignas(64) std::atomic<size_t> next_chunk_{0};    // chunks are claimed by fetch_add
    alignas(64) std::atomic<unsigned> pending_{0};     // workers that have not finished the current job
    std::atomic<bool> stop_{false};
};

}  // namespace colibri
