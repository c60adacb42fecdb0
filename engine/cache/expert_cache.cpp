#include "engine/cache/expert_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/base/thread_start.h"

namespace colibri {

namespace {

constexpr uint64_t kPage = format::kSectionAlignment;

uint64_t round_up(uint64_t v) { return (v + kPage - 1) / kPage * kPage; }

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::string mib(uint64_t bytes) {
    if (bytes < (uint64_t(1) << 20)) return std::to_string(bytes) + " bytes";
    return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

// Views of the expert a slot holds: the mapping's views with data pointing into the slot. Filled field by
// field on a miss, so a load allocates nothing.
struct ExpertCache::SlotWeights {
    uint8_t* base = nullptr;  // the slot's memory
    TensorView gate, up, down, gate_bias, up_bias, down_bias;
    FfnWeights ffn;
};

Result<std::unique_ptr<ExpertCache>> ExpertCache::create(const ExpertSource& model, const ExpertCacheConfig& config) {
    const ModelFile& file = model.file();
    const auto& hp = file.hparams();
    const auto sections = file.sections();
    std::unique_ptr<ExpertCache> c(new ExpertCache());
    c->model_ = &model;
    c->policy_ = config.policy;
    c->prefetch_ = config.prefetch;
    c->budget_ = config.ram_budget;
    c->n_layers_ = hp.n_layers;
    c->compressed_ = file.compressed();

    uint64_t expert_bytes = 0;
    for (const format::ExpertEntry& e : file.experts()) {
        const uint64_t size = sections[e.section].size;
        expert_bytes += round_up(size);
        c->slot_bytes_ = std::max(c->slot_bytes_, round_up(size));
        if (const format::FrameEntry* f = file.stored_frame(e.section)) c->max_frame_bytes_ = std::max(c->max_frame_bytes_, f->stored_size);
    }
    uint32_t moe_layers = 0;
    for (uint32_t l = 0; l < hp.n_layers; ++l) moe_layers += model.routed_experts(l).empty() ? 0 : 1;
    if (moe_layers == 0 || c->slot_bytes_ == 0) return error("--ram-budget: the model has no routed experts to cache");
    c->resident_bytes_ = round_up(file.size()) - std::min(round_up(file.size()), expert_bytes);
    const uint32_t k = std::max(hp.n_experts_active, 1u);
    const uint64_t per_slot_row = c->slot_bytes_ * moe_layers;  // one more slot in every MoE layer
    const uint64_t needed = c->resident_bytes_ + per_slot_row * k;
    if (config.ram_budget < needed)
        return error("--ram-budget " + mib(config.ram_budget) + " is too small: the weights every token uses take " +
                     mib(c->resident_bytes_) + " and " + std::to_string(k) + " expert slots per layer " +
                     mib(per_slot_row * k) + " (at least " + mib(needed) + ")");
    c->slots_ = static_cast<uint32_t>(std::min<uint64_t>((config.ram_budget - c->resident_bytes_) / per_slot_row, hp.n_experts));

    c->arena_bytes_ = per_slot_row * c->slots_;
    void* arena = mmap(nullptr, c->arena_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) return error("--ram-budget: cannot reserve " + mib(c->arena_bytes_) + " for expert slots: " + std::strerror(errno));
    c->arena_ = arena;
    // Slots in 2 MiB pages where the kernel allows it: fewer faults and page walks. On the Qwen3-30B-A3B shape with
    // 54 slots per layer: 13.8-14.6 decoded tok/s against 10.7-12.8 in small pages (docs/PERFORMANCE.md)...
    madvise(arena, c->arena_bytes_, MADV_HUGEPAGE);
    // ...and all of them allocated now, not on each slot's first fill: finding free 2 MiB pages (compaction)
    // and zeroing them on the I/O threads put seconds on the critical path of the first tokens. The budget is
    // the user's to spend; it is taken at load. Kernels before 5.14 refuse the advice and fill on first use.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    madvise(arena, c->arena_bytes_, MADV_POPULATE_WRITE);

    c->buffered_fd_ = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (c->buffered_fd_ < 0) return error(file.path() + ": " + std::strerror(errno));
    // Pages of experts that loading read ahead (around the metadata, in 2 MiB folios) leave the page cache.
    for (const format::ExpertEntry& e : file.experts()) {
        const format::FrameEntry* f = file.stored_frame(e.section);
        posix_fadvise(c->buffered_fd_, static_cast<off_t>(f ? f->stored_offset : sections[e.section].offset),
                      static_cast<off_t>(f ? f->stored_size : sections[e.section].size), POSIX_FADV_DONTNEED);
    }
    // A frame has no page-aligned place in the file: .bin.zst experts are read buffered (and dropped after).
    if (config.direct_io && !c->compressed_) c->fd_ = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    c->direct_ = c->fd_ >= 0;

    c->layers_ = std::make_unique<Layer[]>(hp.n_layers);
    uint8_t* next = static_cast<uint8_t*>(arena);
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        if (model.routed_experts(l).empty()) continue;
        Layer& L = c->layers_[l];
        std::vector<uint32_t> pins;
        if (config.policy == CachePolicy::Pinned && l < config.hot_experts.size()) {
            for (uint32_t e : config.hot_experts[l])
                if (e < hp.n_experts && pins.size() + k < c->slots_) pins.push_back(e);
        }
        L.table = std::make_unique<ExpertSlots>(config.policy, hp.n_experts, c->slots_, pins);
        L.weights.resize(c->slots_);
        for (SlotWeights& s : L.weights) {
            s.base = next;
            next += c->slot_bytes_;
        }
        L.reads.reserve(c->slots_);
        L.missed.assign(hp.n_experts, 0);
        L.loads.assign(hp.n_experts, 0);
        L.read_ahead.assign(hp.n_experts, 0);
        L.evictions.assign(hp.n_experts, 0);
        if (c->prefetch_) {
            L.prefetch_reads.reserve(c->slots_);
            L.predicted.assign(hp.n_experts, 0);
        }
    }
    c->queue_.assign(size_t(2) * moe_layers * c->slots_ + 1, nullptr);
    const unsigned threads = std::max(config.io_threads, 1u);
    try {
        for (unsigned i = 0; i < threads; ++i) c->io_threads_.emplace_back([p = c.get()] { p->io_loop(); });
    } catch (const std::system_error& e) {
        return error(thread_start_failure("the expert cache's " + std::to_string(threads) + " I/O threads", e));  // ~ExpertCache stops the ones started
    }
    return c;
}

ExpertCache::~ExpertCache() {
    {
        std::lock_guard<std::mutex> lk(io_mutex_);
        stopping_ = true;
    }
    io_work_.notify_all();
    for (std::thread& t : io_threads_) t.join();
    if (arena_ != nullptr) munmap(arena_, arena_bytes_);
    if (fd_ >= 0) ::close(fd_);
    if (buffered_fd_ >= 0) ::close(buffered_fd_);
}

ExpertCache::Read ExpertCache::prepare_slot(uint32_t layer, uint32_t slot, uint32_t expert) {
    // Point the slot's views at its memory, at the offsets the tensors have inside the expert's section.
    SlotWeights& s = layers_[layer].weights[slot];
    const FfnWeights& src = model_->routed_experts(layer)[expert];
    const format::SectionEntry& sec = model_->file().sections()[src.gate->section];
    auto place = [&](const TensorView* from, TensorView& to) -> const TensorView* {
        if (from == nullptr) return nullptr;
        // A tensor outside the expert's section (none in the formats written so far) stays mapped.
        if (from->offset < sec.offset || from->offset + from->size > sec.offset + sec.size) return from;
        to.type = from->type;
        to.n_dims = from->n_dims;
        to.rows = from->rows;
        to.cols = from->cols;
        to.offset = from->offset;
        to.size = from->size;
        to.section = from->section;
        to.data = s.base + (from->offset - sec.offset);
        return &to;
    };
    s.ffn.gate = place(src.gate, s.gate);
    s.ffn.up = place(src.up, s.up);
    s.ffn.down = place(src.down, s.down);
    s.ffn.gate_bias = place(src.gate_bias, s.gate_bias);
    s.ffn.up_bias = place(src.up_bias, s.up_bias);
    s.ffn.down_bias = place(src.down_bias, s.down_bias);
    if (const format::FrameEntry* f = model_->file().stored_frame(src.gate->section))
        return Read{s.base, f->stored_offset, f->stored_size, sec.size, expert, Status::ok(), nullptr};
    return Read{s.base, sec.offset, sec.size, 0, expert, Status::ok(), nullptr};
}

void ExpertCache::finish_prefetch(uint32_t layer) {
    Layer& L = layers_[layer];
    if (!L.prefetch_pending) return;
    const uint64_t t0 = now_ns();
    wait(L.prefetch_batch);
    L.stats.stall_ns += now_ns() - t0;
    L.prefetch_pending = false;
    for (const Read& r : L.prefetch_reads) {
        if (r.result) {
            L.stats.bytes_read += r.bytes;
            ++L.stats.prefetched;
            ++L.loads[r.expert];
            ++L.read_ahead[r.expert];
        } else {
            L.table->forget(r.expert);  // nothing half-read stays resident
        }
    }
}

void ExpertCache::score_prediction(uint32_t layer, std::span<const uint32_t> experts) {
    Layer& L = layers_[layer];
    if (!L.has_prediction) return;
    L.has_prediction = false;
    L.stats.predicted += experts.size();
    for (uint32_t e : experts) L.stats.predicted_right += L.predicted[e];
}

void ExpertCache::prefetch(uint32_t layer, std::span<const uint32_t> experts) {
    Layer& L = layers_[layer];
    if (!prefetch_) return;
    finish_prefetch(layer);
    std::fill(L.predicted.begin(), L.predicted.end(), uint8_t(0));
    for (uint32_t e : experts) L.predicted[e] = 1;
    L.has_prediction = true;
    // One group: a predicted expert read here is not evicted by the next one read here.
    L.table->begin_group();
    L.prefetch_reads.clear();
    for (uint32_t e : experts) {
        const auto a = L.table->access(e);
        if (!a) break;  // every slot holds a predicted expert
        if (a->hit) continue;
        if (a->evicted != ExpertSlots::kNone) ++L.evictions[static_cast<uint32_t>(a->evicted)];
        L.prefetch_reads.push_back(prepare_slot(layer, a->slot, e));
    }
    if (L.prefetch_reads.empty()) return;
    L.prefetch_pending = true;  // counted when settled, in the layer's next begin_acquire()
    submit(L.prefetch_reads, L.prefetch_batch, false);
}

Result<uint32_t> ExpertCache::begin_acquire(uint32_t layer, std::span<const uint32_t> experts) {
    Layer& L = layers_[layer];
    finish_prefetch(layer);  // its slots are settled before any is reused
    for (const Read& r : L.reads) L.missed[r.expert] = 0;
    L.table->begin_group();
    L.reads.clear();
    uint32_t m = 0;
    for (; m < experts.size(); ++m) {
        const uint32_t e = experts[m];
        const auto a = L.table->access(e);
        if (!a) break;
        if (a->hit) {
            ++L.stats.hits;
            continue;
        }
        ++L.stats.misses;
        if (a->evicted != ExpertSlots::kNone) ++L.evictions[static_cast<uint32_t>(a->evicted)];
        L.reads.push_back(prepare_slot(layer, a->slot, e));
        L.missed[e] = 1;
    }
    if (m == 0) return error("expert cache: no slot free at layer " + std::to_string(layer));
    if (!L.reads.empty()) {
        L.demand_batch = Batch{};
        L.demand_pending = true;
        submit(L.reads, L.demand_batch, true);
    }
    return m;
}

Status ExpertCache::finish_acquire(uint32_t layer) {
    Layer& L = layers_[layer];
    if (!L.demand_pending) return Status::ok();
    L.demand_pending = false;
    const uint64_t t0 = now_ns();
    wait(L.demand_batch);
    L.stats.stall_ns += now_ns() - t0;
    Status failed = Status::ok();
    for (const Read& r : L.reads) {
        if (r.result) {
            L.stats.bytes_read += r.bytes;
            ++L.loads[r.expert];
            continue;
        }
        L.table->forget(r.expert);  // nothing half-read stays resident
        if (failed) failed = error("expert cache: layer " + std::to_string(layer) + ": " + r.result.message());
    }
    return failed;
}

const FfnWeights& ExpertCache::weights(uint32_t layer, uint32_t expert) const {
    const Layer& L = layers_[layer];
    return L.weights[static_cast<uint32_t>(L.table->slot_of(expert))].ffn;
}

void ExpertCache::layer_state(uint32_t layer, std::span<ExpertSlotState> out) const {
    const Layer& L = layers_[layer];
    if (!L.table) return;  // not a MoE layer
    for (uint32_t e = 0; e < out.size() && e < L.table->n_experts(); ++e) {
        ExpertSlotState& s = out[e];
        s.resident = L.table->slot_of(e) != ExpertSlots::kNone;
        s.loading = false;
        s.pinned = L.table->pinned(e);
        s.loads = L.loads[e];
        s.read_ahead = L.read_ahead[e];
        s.evictions = L.evictions[e];
        s.heat = L.table->heat(e);
    }
    if (L.prefetch_pending)
        for (const Read& r : L.prefetch_reads)
            if (r.expert < out.size()) out[r.expert].loading = true;
}

ExpertCacheStats ExpertCache::total_stats() const {
    ExpertCacheStats t;
    for (uint32_t l = 0; l < n_layers_; ++l) {
        const ExpertCacheStats& s = layers_[l].stats;
        t.hits += s.hits;
        t.misses += s.misses;
        t.bytes_read += s.bytes_read;
        t.stall_ns += s.stall_ns;
        t.prefetched += s.prefetched;
        t.predicted += s.predicted;
        t.predicted_right += s.predicted_right;
    }
    return t;
}

struct ExpertCache::Decoder {
    std::vector<uint8_t> frame;
    std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context{nullptr, ZSTD_freeDCtx};
};

Status ExpertCache::read_exact(int fd, uint8_t* dst, uint64_t bytes, uint64_t offset) const {
    uint64_t done = 0;
    while (done < bytes) {
        const ssize_t got = ::pread(fd, dst + done, bytes - done, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            return error(std::string("read failed: ") + std::strerror(errno));
        }
        if (got == 0) return error("the file ends inside an expert");
        done += static_cast<uint64_t>(got);
    }
    return Status::ok();
}

Status ExpertCache::read_one(Read& r, Decoder& decoder) const {
    if (r.image_bytes != 0) {
        // A .bin.zst: the frame into the thread's buffer, decompressed into the slot.
        if (decoder.frame.size() < r.bytes || !decoder.context) return error("expert cache: no memory to decompress an expert");
        COLIBRI_TRY(read_exact(buffered_fd_, decoder.frame.data(), r.bytes, r.offset));
        posix_fadvise(buffered_fd_, static_cast<off_t>(r.offset), static_cast<off_t>(r.bytes), POSIX_FADV_DONTNEED);
        const size_t got = ZSTD_decompressDCtx(decoder.context.get(), r.dst, r.image_bytes, decoder.frame.data(), r.bytes);
        if (ZSTD_isError(got) || got != r.image_bytes)
            return error(std::string("damaged zstd frame (") + (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "wrong decompressed size") + ")");
        return Status::ok();
    }
    uint64_t done = 0;
    while (done < r.bytes) {
        // O_DIRECT reads whole pages (the slot has room for the padding); a short read that ends mid-page
        // finishes buffered, as does everything once the file system has refused O_DIRECT.
        const bool direct = direct_.load(std::memory_order_relaxed) && done % kPage == 0;
        const uint64_t want = direct ? round_up(r.bytes) - done : r.bytes - done;
        const ssize_t got = ::pread(direct ? fd_ : buffered_fd_, static_cast<uint8_t*>(r.dst) + done, want, static_cast<off_t>(r.offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && direct) {
                direct_.store(false, std::memory_order_relaxed);
                continue;
            }
            return error(std::string("read failed: ") + std::strerror(errno));
        }
        if (got == 0) return error("the file ends inside an expert");
        done += static_cast<uint64_t>(got);
    }
    // Buffered reads leave a copy in the page cache, which counts against a memory limit: drop it.
    if (!direct_.load(std::memory_order_relaxed))
        posix_fadvise(buffered_fd_, static_cast<off_t>(r.offset), static_cast<off_t>(r.bytes), POSIX_FADV_DONTNEED);
    return Status::ok();
}

void ExpertCache::submit(std::span<Read> reads, Batch& batch, bool urgent) {
    {
        std::lock_guard<std::mutex> lk(io_mutex_);
        batch.left += reads.size();
        const size_t cap = queue_.size();
        if (urgent) {
            // In front of the queue, in their own order.
            for (size_t i = reads.size(); i-- > 0;) {
                reads[i].batch = &batch;
                queue_head_ = (queue_head_ + cap - 1) % cap;
                queue_[queue_head_] = &reads[i];
                ++queue_count_;
            }
        } else {
            for (Read& r : reads) {
                r.batch = &batch;
                queue_[(queue_head_ + queue_count_) % cap] = &r;
                ++queue_count_;
            }
        }
    }
    io_work_.notify_all();
}

void ExpertCache::wait(Batch& batch) {
    std::unique_lock<std::mutex> lk(io_mutex_);
    io_done_.wait(lk, [&] { return batch.left == 0; });
}

void ExpertCache::io_loop() {
    Decoder decoder;
    if (compressed_) {
        try {
            decoder.frame.resize(max_frame_bytes_);
        } catch (const std::bad_alloc&) {
            decoder.frame.clear();  // each read then fails with a clear error
        }
        decoder.context.reset(ZSTD_createDCtx());
    }
    std::unique_lock<std::mutex> lk(io_mutex_);
    for (;;) {
        io_work_.wait(lk, [&] { return stopping_ || queue_count_ > 0; });
        if (stopping_) return;
        Read& r = *queue_[queue_head_];
        queue_head_ = (queue_head_ + 1) % queue_.size();
        --queue_count_;
        lk.unlock();
        r.result = read_one(r, decoder);
        lk.lock();
        if (--r.batch->left == 0) io_done_.notify_all();
    }
}

}  // namespace colibri
