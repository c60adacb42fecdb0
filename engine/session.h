// Per-conversation state: KV cache, scratch buffers and the position. eval() runs one token through the
// model and returns its logits. Buffers are sized once at construction; the hot path allocates nothing.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model.h"
#include "status.h"
#include "thread_pool.h"
#include "trace.h"

namespace colibri {

class Session {
public:
    // context = 0 picks min(max_position, 4096).
    Session(const Model& model, ThreadPool& pool, uint32_t context = 0);

    // Feeds one token at position(); returns the logits (vocab floats), valid until the next call.
    Result<std::span<const float>> eval(int32_t token);
    // Feeds several tokens; returns the logits after the last one.
    Result<std::span<const float>> eval(std::span<const int32_t> tokens);

    void reset() { position_ = 0; }
    // Drops everything after n tokens (regenerate from an earlier point).
    void truncate(uint32_t n) { if (n < position_) position_ = n; }
    uint32_t position() const { return position_; }
    uint32_t context() const { return context_; }
    void set_observer(TraceObserver* observer) { observer_ = observer; }

private:
    void attention(uint32_t layer, const LayerWeights& w);
    Status moe(uint32_t layer, const LayerWeights& w);
    void ffn(const FfnWeights& w, uint32_t ffn_dim, float* out);
    void matvec(const TensorView& w, const float* x, float* y);

    const Model& model_;
    ThreadPool& pool_;
    uint32_t context_ = 0;
    uint32_t position_ = 0;
    TraceObserver* observer_ = nullptr;
    uint64_t router_ns_ = 0;  // router time of the current layer, for LayerTiming

    std::vector<float> k_cache_, v_cache_;  // [layer][position][kv_dim]
    std::vector<float> x_, h_, q_, k_, v_, att_, proj_, scores_;
    std::vector<float> gate_, up_, ffn_out_, moe_out_, router_logits_, router_probs_;
    std::vector<int32_t> selected_;
    std::vector<float> selected_w_;
    std::vector<float> logits_;
};

}  // namespace colibri
