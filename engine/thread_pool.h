// The engine's thread pool. Work is split into contiguous, equal ranges by a fixed rule that depends only on
// the item count and the thread count, and every output element is produced by exactly one task, so results
// never depend on timing or on the number of threads.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace colibri {

class ThreadPool {
public:
    explicit ThreadPool(unsigned threads);  // 0 = hardware concurrency
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Calls fn(begin, end) over [0, n) split into at most size() ranges; blocks until all are done.
    // Ranges shorter than min_chunk are merged so tiny jobs run on the calling thread alone.
    void parallel_for(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn);

private:
    void worker_loop(unsigned index);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(size_t, size_t)>* job_ = nullptr;
    size_t job_n_ = 0, job_parts_ = 0;
    unsigned long generation_ = 0;
    unsigned pending_ = 0;
    bool stop_ = false;
};

}  // namespace colibri
