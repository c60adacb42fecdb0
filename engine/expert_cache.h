// Models larger than RAM: with a RAM budget the routed experts are not used through the mapping. What every
// token uses (embeddings, attention, routers, norms, shared experts, lm head) stays mapped and resident; each
// MoE layer gets the same number of expert slots, buffers in anonymous memory filled from the file with pread
// by a small I/O thread pool (O_DIRECT where the file system takes it, so the page cache holds no second
// copy). ExpertSlots (engine/expert_slots.h) decides which expert a miss evicts. A slot holds the expert's
// section at the same offset within a page as the mapping does, so the kernels compute the same bits.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "expert_slots.h"
#include "status.h"

namespace colibri {

class Model;
struct FfnWeights;
struct TensorView;

struct ExpertCacheConfig {
    uint64_t ram_budget = 0;  // bytes for the weights: what every token uses plus every layer's slots
    CachePolicy policy = CachePolicy::Lru;
    // Pinned: per layer index of the model, its experts hottest first (the slots - top_k first are pinned).
    std::vector<std::vector<uint32_t>> hot_experts;
    unsigned io_threads = 4;
    bool direct_io = true;  // try O_DIRECT; buffered reads where the file system refuses it
};

struct ExpertCacheStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t bytes_read = 0;
    uint64_t stall_ns = 0;  // time the computation waited for reads
};

class ExpertCache {
public:
    // Fails when the budget cannot hold what every token uses plus top_k slots per MoE layer (the message says
    // how much is needed), for a .bin.zst, or when the file cannot be opened for reading.
    static Result<std::unique_ptr<ExpertCache>> create(const Model& model, const ExpertCacheConfig& config);
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    uint32_t slots_per_layer() const { return slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    uint64_t resident_bytes() const { return resident_bytes_; }  // the weights that stay mapped
    uint64_t budget() const { return budget_; }
    CachePolicy policy() const { return policy_; }
    bool direct_io() const { return direct_; }

    // A session holds a layer's lock from acquire() until it has computed the experts acquired.
    std::unique_lock<std::mutex> lock(uint32_t layer) { return std::unique_lock<std::mutex>(layers_[layer].mutex); }
    // Under the lock: the layer's clock moves by `tokens` (LFRU's decay).
    void advance(uint32_t layer, uint32_t tokens) { layers_[layer].table->advance(tokens); }
    // Under the lock: makes the longest prefix of `experts` (distinct) that fits in the layer's slots together
    // resident, reading the misses in parallel, and returns its length (at least 1). A failed read is an error
    // and leaves nothing of that expert resident.
    Result<uint32_t> acquire(uint32_t layer, std::span<const uint32_t> experts);
    // An expert of the last acquire() of the layer: its weights in its slot. Valid under the lock.
    const FfnWeights& weights(uint32_t layer, uint32_t expert) const;

    // Under the layer's lock, or while no session evaluates.
    ExpertCacheStats layer_stats(uint32_t layer) const { return layers_[layer].stats; }
    // While no session evaluates.
    ExpertCacheStats total_stats() const;

private:
    ExpertCache() = default;
    struct SlotWeights;  // per slot: views of the expert it holds
    struct Read {
        void* dst = nullptr;
        uint64_t offset = 0, bytes = 0;
        Status result;
    };
    struct Layer {
        std::mutex mutex;
        std::unique_ptr<ExpertSlots> table;
        std::vector<SlotWeights> weights;  // per slot
        std::vector<Read> reads;  // acquire()'s misses, reserved for the layer's slots
        ExpertCacheStats stats;
    };
    // Runs reads on the I/O threads and waits for all of them.
    void read_all(std::span<Read> reads);
    void io_loop();
    Status read_one(Read& r) const;

    const Model* model_ = nullptr;
    CachePolicy policy_ = CachePolicy::Lru;
    uint32_t slots_ = 0;
    uint64_t slot_bytes_ = 0, resident_bytes_ = 0, budget_ = 0;
    int fd_ = -1;         // O_DIRECT when direct_
    int buffered_fd_ = -1;
    mutable std::atomic<bool> direct_{false};  // false once the file system has refused O_DIRECT
    void* arena_ = nullptr;  // every slot of every layer, page-aligned
    uint64_t arena_bytes_ = 0;
    std::unique_ptr<Layer[]> layers_;
    uint32_t n_layers_ = 0;

    // The I/O pool: one batch of reads at a time (batch_mutex_), taken one by one by the threads.
    std::mutex batch_mutex_, io_mutex_;
    std::condition_variable io_work_, io_done_;
    std::span<Read> batch_;
    size_t next_read_ = 0, reads_left_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> io_threads_;
};

}  // namespace colibri
