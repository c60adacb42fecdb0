#include "thread_pool.h"

#include <algorithm>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace colibri {

namespace {
// Range k of `parts` equal ranges over [0, n).
void part_range(size_t n, size_t parts, size_t k, size_t* begin, size_t* end) {
    *begin = n * k / parts;
    *end = n * (k + 1) / parts;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#else
    std::this_thread::yield();
#endif
}

// Polls `a` until it differs from `old` or `spin` has passed; returns its last value.
template <class T>
T spin_while_equal(const std::atomic<T>& a, T old, std::chrono::microseconds spin) {
    T v = a.load(std::memory_order_acquire);
    if (v != old || spin.count() == 0) return v;
    const auto until = std::chrono::steady_clock::now() + spin;
    for (unsigned i = 1;; ++i) {
        cpu_relax();
        v = a.load(std::memory_order_acquire);
        if (v != old) return v;
        if ((i & 255) == 0 && std::chrono::steady_clock::now() >= until) return v;
    }
}

// Waits until `a` differs from `old`: polls for `spin`, then sleeps on it.
template <class T>
T wait_while_equal(const std::atomic<T>& a, T old, std::chrono::microseconds spin) {
    T v = spin_while_equal(a, old, spin);
    while (v == old) {
        a.wait(old, std::memory_order_acquire);
        v = a.load(std::memory_order_acquire);
    }
    return v;
}
}  // namespace

std::chrono::microseconds ThreadPool::default_spin_time() {
    if (const char* env = std::getenv("COLIBRI_SPIN_US"); env != nullptr && *env != '\0') {
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && v >= 0) return std::chrono::microseconds(std::min<long>(v, 1000000));
    }
    return std::chrono::microseconds(300);
}

ThreadPool::ThreadPool(unsigned threads, std::chrono::microseconds spin) : spin_(spin) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    threads = std::min(threads, (1u << kPartBits) - 1);
    // More threads than cores: a polling thread would take a core from one with work to do.
    if (const unsigned cores = std::thread::hardware_concurrency(); cores != 0 && threads > cores)
        spin_ = std::chrono::microseconds(0);
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(uint64_t(1) << kPartBits, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t min_chunk, RangeFn fn) {
    if (n == 0) return;
    size_t parts = std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
    if (parts <= 1) {
        fn(0, n);
        return;
    }
    // The previous job's workers have all finished (the caller waited for them), so no participant can
    // still be reading these.
    job_.store(&fn, std::memory_order_relaxed);
    job_n_.store(n, std::memory_order_relaxed);
    pending_.store(static_cast<uint32_t>(parts - 1), std::memory_order_relaxed);
    const uint64_t counter = (generation_.load(std::memory_order_relaxed) >> kPartBits) + 1;
    generation_.store(counter << kPartBits | parts, std::memory_order_release);
    generation_.notify_all();  // a no-op unless a worker sleeps
    size_t b, e;
    part_range(n, parts, 0, &b, &e);
    fn(b, e);
    for (uint32_t left = pending_.load(std::memory_order_acquire); left != 0;)
        left = wait_while_equal(pending_, left, spin_);
}

void ThreadPool::worker_loop(unsigned index) {
    uint64_t seen = 0;  // the value before any job: one published before this thread runs is not "seen"
    for (;;) {
        seen = wait_while_equal(generation_, seen, spin_);
        if (stop_.load(std::memory_order_relaxed)) return;
        const size_t parts = seen & ((uint64_t(1) << kPartBits) - 1);
        if (index >= parts) continue;  // not part of this job (the caller does not wait for this thread)
        const RangeFn* job = job_.load(std::memory_order_relaxed);
        const size_t n = job_n_.load(std::memory_order_relaxed);
        size_t b, e;
        part_range(n, parts, index, &b, &e);
        (*job)(b, e);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
}

}  // namespace colibri
