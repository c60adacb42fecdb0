// Models larger than RAM: with a RAM budget the routed experts are not used through the mapping. What every
// token uses (embeddings, attention, routers, norms, shared experts, lm head) stays mapped and resident; each
// MoE layer gets the same number of expert slots, buffers in anonymous memory filled from the file with pread
// by a small I/O thread pool (O_DIRECT where the file system takes it, so the page cache holds no second
// copy). ExpertSlots (engine/cache/expert_slots.h) decides which expert a miss evicts. A slot holds the expert's
// section at the same offset within a page as the mapping does, so the kernels compute the same bits. From a
// .bin.zst a miss reads the expert's zstd frame and decompresses it into the slot.
//
// With prefetch on, the session predicts a layer's experts one MoE layer ahead (the next layer's router applied
// to the current hidden state) and prefetch() starts reading the predicted misses while the current layer
// computes; the next begin_acquire() of that layer first waits for them. Reads the computation waits for (a miss at
// acquire) go before queued prefetches.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/base/status.h"
#include "engine/cache/expert_slots.h"
#include "engine/cache/expert_source.h"

namespace colibri {

struct ExpertCacheConfig {
    uint64_t ram_budget = 0;  // bytes for the weights: what every token uses plus every layer's slots
    CachePolicy policy = CachePolicy::Lru;
    // Pinned: per layer index of the model, its experts hottest first (the slots - top_k first are pinned).
    std::vector<std::vector<uint32_t>> hot_experts;
    unsigned io_threads = 4;
    bool direct_io = true;  // try O_DIRECT; buffered reads where the file system refuses it
    bool prefetch = false;  // read the experts the session predicts for the next MoE layer ahead of use
};

struct ExpertCacheStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t bytes_read = 0;
    uint64_t stall_ns = 0;  // time the computation waited for reads (its misses', and prefetches still running)
    uint64_t prefetched = 0;       // experts read ahead on a prediction (their bytes are in bytes_read)
    uint64_t predicted = 0;        // experts used at a layer for which a prediction had been made
    uint64_t predicted_right = 0;  // of those, how many the prediction named
};

// One routed expert's place in a layer's cache, for a live view (the Studio's cache view): counts since load,
// so that two states taken around an evaluation say what it read and what it evicted.
struct ExpertSlotState {
    bool resident = false;  // in a slot (or being read into one)
    bool loading = false;   // a prefetch is reading it now
    bool pinned = false;    // holds a reserved slot (Pinned policy)
    uint32_t loads = 0;      // reads into a slot that completed (on a miss or ahead of use)
    uint32_t read_ahead = 0; // of those, reads ahead of use (prefetch)
    uint32_t evictions = 0;  // times it left a slot for another expert
    double heat = 0.0;       // the policy's use score: LFRU's decayed count, else the plain count
};

class ExpertCache {
public:
    // Fails when the budget cannot hold what every token uses plus top_k slots per MoE layer (the message says
    // how much is needed), or when the file cannot be opened for reading.
    static Result<std::unique_ptr<ExpertCache>> create(const ExpertSource& model, const ExpertCacheConfig& config);
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    uint32_t slots_per_layer() const { return slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    uint64_t resident_bytes() const { return resident_bytes_; }  // the weights that stay mapped
    uint64_t budget() const { return budget_; }
    CachePolicy policy() const { return policy_; }
    bool direct_io() const { return direct_; }
    bool prefetching() const { return prefetch_; }

    // A session holds a layer's lock from begin_acquire() until it has computed the experts acquired.
    std::unique_lock<std::mutex> lock(uint32_t layer) { return std::unique_lock<std::mutex>(layers_[layer].mutex); }
    // Under the lock: the layer's clock moves by `tokens` (LFRU's decay).
    void advance(uint32_t layer, uint32_t tokens) { layers_[layer].table->advance(tokens); }
    // Under the lock, in two steps, so that a group's resident experts can compute while its misses are read:
    // begin_acquire() makes the longest prefix of `experts` (distinct) that fits in the layer's slots together
    // resident, queues its misses (in front of queued prefetches) and returns its length (at least 1); missed()
    // names the group's experts being read; finish_acquire() waits for them. A failed read is an error of
    // finish_acquire() and leaves nothing of that expert resident. Every begin_acquire() is finished before the
    // lock is released or the layer acquires again.
    Result<uint32_t> begin_acquire(uint32_t layer, std::span<const uint32_t> experts);
    bool missed(uint32_t layer, uint32_t expert) const { return layers_[layer].missed[expert] != 0; }
    Status finish_acquire(uint32_t layer);
    // Under the lock: the experts the layer will use for the chunk (distinct), before its first begin_acquire(): scores
    // the prediction made for the layer, if any.
    void score_prediction(uint32_t layer, std::span<const uint32_t> experts);
    // Under the lock (prefetch on): the predicted experts of a layer (distinct) become resident in the background:
    // the misses among them, as many as the slots hold, are queued for reading and prefetch() returns. A failed
    // read only leaves its expert out (the begin_acquire() that needs it reads it again and reports the error).
    void prefetch(uint32_t layer, std::span<const uint32_t> experts);
    // An expert of the last begin_acquire() of the layer: its weights in its slot. Valid under the lock.
    const FfnWeights& weights(uint32_t layer, uint32_t expert) const;

    // Under the layer's lock: each expert's state at the layer (out has one entry per expert of the model).
    void layer_state(uint32_t layer, std::span<ExpertSlotState> out) const;

    // Under the layer's lock, or while no session evaluates.
    ExpertCacheStats layer_stats(uint32_t layer) const { return layers_[layer].stats; }
    // While no session evaluates.
    ExpertCacheStats total_stats() const;

private:
    ExpertCache() = default;
    struct SlotWeights;  // per slot: views of the expert it holds
    struct Batch {
        size_t left = 0;  // reads not finished (under io_mutex_)
    };
    struct Read {
        void* dst = nullptr;
        uint64_t offset = 0, bytes = 0;  // in the file as stored
        uint64_t image_bytes = 0;        // .bin.zst: the section's size once decompressed (0: a plain read)
        uint32_t expert = 0;             // whose slot it fills (forgotten if the read fails)
        Status result;
        Batch* batch = nullptr;
    };
    struct Layer {
        std::mutex mutex;
        std::unique_ptr<ExpertSlots> table;
        std::vector<SlotWeights> weights;  // per slot
        std::vector<Read> reads;  // begin_acquire()'s misses, reserved for the layer's slots
        Batch demand_batch;       // their reads, between begin_acquire() and finish_acquire()
        bool demand_pending = false;
        std::vector<uint8_t> missed;       // per expert: a miss of the last begin_acquire()
        ExpertCacheStats stats;
        std::vector<uint32_t> loads, read_ahead, evictions;  // per expert, for layer_state()
        // Prefetch: the reads in flight, and the last prediction, per expert.
        std::vector<Read> prefetch_reads;
        Batch prefetch_batch;
        bool prefetch_pending = false;
        std::vector<uint8_t> predicted;
        bool has_prediction = false;
    };
    // Points the slot's views at its memory for the expert and returns the read that fills it.
    Read prepare_slot(uint32_t layer, uint32_t slot, uint32_t expert);
    // Under the layer's lock: waits for the layer's prefetch, if one runs, and settles it (failed reads forgotten).
    void finish_prefetch(uint32_t layer);
    // Queues reads on the I/O threads (urgent: before the reads already queued) into `batch`; wait() blocks until
    // the batch has finished.
    void submit(std::span<Read> reads, Batch& batch, bool urgent);
    void wait(Batch& batch);
    // Per I/O thread: a .bin.zst frame's bytes and a decompression context, made once.
    struct Decoder;
    void io_loop();
    Status read_one(Read& r, Decoder& decoder) const;
    Status read_exact(int fd, uint8_t* dst, uint64_t bytes, uint64_t offset) const;

    const ExpertSource* model_ = nullptr;
    CachePolicy policy_ = CachePolicy::Lru;
    bool prefetch_ = false;
    uint32_t slots_ = 0;
    uint64_t slot_bytes_ = 0, resident_bytes_ = 0, budget_ = 0;
    bool compressed_ = false;      // a .bin.zst: experts are decompressed into their slots
    uint64_t max_frame_bytes_ = 0;  // the largest expert frame (.bin.zst)
    int fd_ = -1;         // O_DIRECT when direct_
    int buffered_fd_ = -1;
    mutable std::atomic<bool> direct_{false};  // false once the file system has refused O_DIRECT
    void* arena_ = nullptr;  // every slot of every layer, page-aligned
    uint64_t arena_bytes_ = 0;
    std::unique_ptr<Layer[]> layers_;
    uint32_t n_layers_ = 0;

    // The I/O pool: a ring of queued reads (room for one acquire and one prefetch per layer), taken one by one by
    // the threads; each read counts down its batch.
    std::mutex io_mutex_;
    std::condition_variable io_work_, io_done_;
    std::vector<Read*> queue_;
    size_t queue_head_ = 0, queue_count_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> io_threads_;
};

}  // namespace colibri
