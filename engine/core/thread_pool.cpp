#include "engine/core/thread_pool.h"

#include "engine/base/thread_start.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

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

uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
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

bool ThreadPool::balancing_from_environment() {
    const char* env = std::getenv("COLIBRI_BALANCE");
    return env == nullptr || std::string_view(env) != "0";
}

unsigned ThreadPool::thread_count(unsigned requested) {
    if (requested == 0) requested = std::max(1u, std::thread::hardware_concurrency());
    return std::min(requested, (1u << kPartBits) - 1);
}

ThreadPool::ThreadPool(unsigned threads, std::chrono::microseconds spin) : spin_(spin), balancing_(balancing_from_environment()) {
    threads = thread_count(threads);
    if (threads > kInlineBounds + 1) inner_overflow_.assign(threads - 1, 0);
    done_ = std::make_unique<Done[]>(threads - 1);
    given_.assign(threads - 1, 0);
    part_ns_.assign(threads, 0);
    speed_.assign(threads, 1.0);
    // More threads than cores: a polling thread would take a core from one with work to do.
    if (const unsigned cores = std::thread::hardware_concurrency(); cores != 0 && threads > cores)
        spin_ = std::chrono::microseconds(0);
    try {
        workers_.reserve(threads - 1);
        for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
    } catch (const std::system_error&) {
        stop_workers();  // a std::thread destroyed while it runs would terminate the process
        throw;
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
    // Part count 0: stop.
    job_.generation.store(next_generation(0), std::memory_order_release);
    job_.generation.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(unsigned threads, std::chrono::microseconds spin) {
    try {
        return std::make_unique<ThreadPool>(threads, spin);
    } catch (const std::system_error& e) {
        return error(thread_start_failure(std::to_string(thread_count(threads) - 1) + " worker threads", e));
    }
}

double ThreadPool::balanced_share(unsigned part) const {
    double total = 0.0;
    for (double v : speed_) total += v;
    return part < speed_.size() ? speed_[part] / total : 0.0;
}

size_t ThreadPool::bound(size_t k, size_t parts) const {
    if (k == 0) return 0;
    if (k == parts) return job_.n;
    return inner()[k - 1];
}

void ThreadPool::range_of(size_t n, size_t parts, size_t k, bool balanced, size_t* begin, size_t* end) const {
    if (balanced) {
        *begin = bound(k, parts);
        *end = bound(k + 1, parts);
    } else {
        part_range(n, parts, k, begin, end);
    }
}

// After a balanced job: each part's speed (items per ns) relative to the parts' mean, folded into speed_ with
// weight 1/4, so one stretched hand-off (an interrupt, the host taking the vCPU) moves the split little and a
// slower vCPU shows within a few jobs. A measurement is clamped to [1/2, 2] of the mean.
void ThreadPool::learn_speeds(size_t parts) {
    const auto measured = [&](size_t k) {
        return double(bound(k + 1, parts) - bound(k, parts)) / double(std::max<uint64_t>(part_ns_[k], 1));
    };
    double mean = 0.0;
    for (size_t k = 0; k < parts; ++k) mean += measured(k);
    mean /= double(parts);
    if (!(mean > 0.0)) return;
    for (size_t k = 0; k < parts; ++k) speed_[k] = 0.75 * speed_[k] + 0.25 * std::clamp(measured(k) / mean, 0.5, 2.0);
}

uint64_t ThreadPool::run_part(size_t index, size_t parts, size_t n, const RangeFn& fn, bool balanced) const {
    size_t b, e;
    range_of(n, parts, index, balanced, &b, &e);
    if (!balanced) {
        fn(b, e);
        return 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    fn(b, e);
    return elapsed_ns(t0);
}

void ThreadPool::parallel_for(size_t n, size_t min_chunk, RangeFn fn, Split split) {
    if (n == 0) return;
    size_t parts = std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
    if (parts <= 1) {
        fn(0, n);
        return;
    }
    // The previous job's workers have all finished (the caller waited for them), so no participant can
    // still be reading the job's fields.
    const bool balanced = balancing_ && split == Split::Balanced && parts == size() && n >= kBalancedMinItems;
    job_.fn = fn;
    job_.n = n;
    job_.balanced = balanced;
    if (balanced) {
        double total = 0.0;
        for (size_t k = 0; k < parts; ++k) total += speed_[k];
        double at = 0.0;
        size_t prev = 0;
        for (size_t k = 1; k < parts; ++k) {
            at += speed_[k - 1];
            prev = std::clamp<size_t>(static_cast<size_t>(double(n) * (at / total)), prev, n);
            inner()[k - 1] = prev;
        }
    }
    job_.generation.store(next_generation(parts), std::memory_order_release);
    job_.generation.notify_all();  // a no-op unless a worker sleeps
    part_ns_[0] = run_part(0, parts, n, fn, balanced);
    for (size_t k = 1; k < parts; ++k) {
        // Worker k has finished either every job before this one or this one too: the count is given_ - 1 or
        // given_, so its wrapping never confuses the two.
        Done& d = done_[k - 1];
        const uint32_t expected = ++given_[k - 1];
        for (uint32_t seen = d.jobs.load(std::memory_order_acquire); seen != expected;)
            seen = wait_while_equal(d.jobs, seen, spin_);
        part_ns_[k] = d.ns;
    }
    if (balanced) learn_speeds(parts);
}

void ThreadPool::worker_loop(unsigned index) {
    uint64_t seen = 0;  // the value before any job: one published before this thread runs is not "seen"
    Done& done = done_[index - 1];
    for (;;) {
        seen = wait_while_equal(job_.generation, seen, spin_);
        const size_t parts = seen & ((uint64_t(1) << kPartBits) - 1);
        if (parts == 0) return;  // stopping
        if (index >= parts) continue;  // not part of this job (the caller does not wait for this thread)
        done.ns = run_part(index, parts, job_.n, job_.fn, job_.balanced);
        done.jobs.store(done.jobs.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        done.jobs.notify_one();  // a no-op unless the caller sleeps
    }
}

}  // namespace colibri
