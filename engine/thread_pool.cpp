#include "thread_pool.h"

#include <algorithm>

namespace colibri {

namespace {
// Range k of `parts` equal ranges over [0, n).
void part_range(size_t n, size_t parts, size_t k, size_t* begin, size_t* end) {
    *begin = n * k / parts;
    *end = n * (k + 1) / parts;
}
}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t min_chunk, RangeFn fn) {
    if (n == 0) return;
    size_t parts = std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
    if (parts <= 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &fn;
        job_n_ = n;
        job_parts_ = parts;
        pending_ = static_cast<unsigned>(parts - 1);
        ++generation_;
    }
    start_cv_.notify_all();
    size_t b, e;
    part_range(n, parts, 0, &b, &e);
    fn(b, e);
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_loop(unsigned index) {
    unsigned long seen = 0;
    for (;;) {
        const RangeFn* job;
        size_t n, parts;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = job_n_;
            parts = job_parts_;
        }
        if (index < parts) {
            size_t b, e;
            part_range(n, parts, index, &b, &e);
            (*job)(b, e);
            std::lock_guard<std::mutex> lock(mutex_);
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }
}

}  // namespace colibri
