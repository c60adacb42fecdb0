// The engine's thread pool. Work is split into contiguous, equal ranges by a fixed rule that depends only on
// the item count and the thread count, and every output element is produced by exactly one task, so results
// never depend on timing or on the number of threads.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <mutex>
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

    // Calls fn(begin, end) over [0, n) split into at most size() ranges; blocks until all are done.
    // Ranges shorter than min_chunk are merged so tiny jobs run on the calling thread alone.
    void parallel_for(size_t n, size_t min_chunk, RangeFn fn);

private:
    void worker_loop(unsigned index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_cv_, done_cv_;
    const RangeFn* job_ = nullptr;
    size_t job_n_ = 0, job_parts_ = 0;
    unsigned long generation_ = 0;
    unsigned pending_ = 0;
    bool stop_ = false;
};

}  // namespace colibri
