#include "thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace colibri {

namespace {
// How long an idle worker spins before it sleeps: longer than the gaps between a token's hand-offs
// (norms, attention and routing on the calling thread take microseconds), far shorter than a human pause.
constexpr auto kSpinTime = std::chrono::microseconds(300);
// Chunks per thread: enough that a thread slowed by another process on its core does not hold up the
// others for long, few enough that claiming stays negligible.
constexpr size_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
}

size_t ThreadPool::chunk_count(size_t n, size_t min_chunk) const {
    const size_t max_chunks = n / std::max<size_t>(1, min_chunk);
    return std::clamp<size_t>(max_chunks, 1, size_t(size()) * kChunksPerThread);
}

void ThreadPool::run_chunks() {
    const RangeFn& fn = *job_;
    const size_t n = job_n_, chunks = job_chunks_;
    for (;;) {
        const size_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
        if (c >= chunks) return;
        fn(n * c / chunks, n * (c + 1) / chunks);
    }
}

void ThreadPool::parallel_for(size_t n, size_t min_chunk, RangeFn fn) {
    if (n == 0) return;
    const size_t chunks = chunk_count(n, min_chunk);
    if (chunks <= 1 || workers_.empty()) {
        fn(0, n);
        return;
    }
    // Every worker takes part in every job (claiming nothing if it comes late), and the caller waits for
    // all of them, so no worker can still be looking at this job when the next one is written.
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    next_chunk_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    run_chunks();
    // The workers are at most one chunk behind; spin, then yield if a worker's core was taken away.
    for (unsigned spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 4096)
            cpu_relax();
        else
            std::this_thread::yield();
    }
    job_ = nullptr;
}

void ThreadPool::worker_loop() {
    // 0, the value before any job: a job published before this thread first runs must not be mistaken for
    // one it has already done.
    uint32_t seen = 0;
    for (;;) {
        // Spin briefly for the next job, then sleep until generation_ changes.
        const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
        uint32_t g;
        for (unsigned i = 0;; ++i) {
            g = generation_.load(std::memory_order_acquire);
            if (g != seen) break;
            if ((i & 255) == 255 && std::chrono::steady_clock::now() >= spin_until) {
                generation_.wait(seen, std::memory_order_acquire);
                i = 0;
                continue;
            }
            cpu_relax();
        }
        seen = g;
        if (stop_.load(std::memory_order_relaxed)) return;
        run_chunks();
        pending_.fetch_sub(1, std::memory_order_release);
    }
}

}  // namespace colibri
