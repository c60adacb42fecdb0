// Per-conversation state: KV cache, scratch buffers and the position. eval() runs tokens through the model
// and returns the logits after the last one. A prompt is evaluated in chunks: every projection reads its
// weights once per chunk, and each selected expert's weights once per chunk for all the chunk's tokens that
// chose it. Results are bit-identical to evaluating one token at a time, for any chunk size and thread count.
// Buffers are sized once at construction; the hot path allocates nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/core/activation_buffer.h"
#include "engine/core/matmul_jobs.h"
#include "engine/core/model.h"
#include "engine/cache/prefetch.h"
#include "engine/core/router.h"
#include "engine/base/status.h"
#include "engine/core/thread_pool.h"
#include "engine/core/trace.h"

namespace colibri {

struct SessionOptions {
    RouterKind router = RouterKind::Exact;
    // Tokens per chunk of a batched eval (1 = token by token); at most kMaxChunk.
    uint32_t chunk = 64;
    // madvise(MADV_WILLNEED) the experts the previous token chose at the next layer (engine/cache/prefetch.h).
    bool prefetch_experts = false;
    // Transparent huge pages for the KV cache and the larger activation buffers (engine/core/activation_buffer.h).
    bool huge_pages = false;
    // Predict each MoE layer's experts one layer ahead (the next router on the current hidden state) and report
    // the predictions to the observer (on_prediction), as the expert cache's prefetch does for itself.
    bool predict_experts = false;

    static constexpr uint32_t kMaxChunk = 256;
    // Defaults, overridden by COLIBRI_PREFETCH=0|1 and COLIBRI_HUGEPAGE=0|1 (huge pages default to the
    // COLIBRI_USE_HUGEPAGE build option).
    static SessionOptions from_environment();
};

class Session {
public:
    // context = 0 picks min(max_position, 4096).
    Session(const Model& model, ThreadPool& pool, uint32_t context = 0,
            SessionOptions options = SessionOptions::from_environment());

    // Feeds one token at position(); returns the logits (vocab floats), valid until the next call.
    Result<std::span<const float>> eval(int32_t token);
    // Feeds several tokens; returns the logits after the last one. Checks every id and the context first, so
    // on an error nothing is evaluated.
    Result<std::span<const float>> eval(std::span<const int32_t> tokens);

    // One sequence's part of a batched step: its session and the tokens it feeds at its own positions.
    struct BatchPart {
        Session* session;
        std::span<const int32_t> tokens;
    };
    // Continuous batching: evaluates several sessions' tokens in one forward pass. The router's, the shared
    // expert's and each selected expert's weights are read once for all the parts' tokens; attention (with its
    // projections) runs per session, in its own KV cache at its own positions. Afterwards each session's logits() are those after its last
    // token, bit-identical to what the session's own eval() gives. The sessions share one model and pool and
    // are distinct; the first one's buffers hold the step, so all tokens together must fit its chunk_capacity().
    // Checks every part first: on an error nothing is evaluated.
    static Status eval_batch(std::span<const BatchPart> parts);
    // The logits after the last evaluated position (vocab floats).
    std::span<const float> logits() const { return logits_; }
    uint32_t chunk_capacity() const { return capacity_; }

    void reset() { position_ = 0; }
    // Drops everything after n tokens (regenerate from an earlier point).
    void truncate(uint32_t n) { if (n < position_) position_ = n; }
    uint32_t position() const { return position_; }
    const Model& model() const { return model_; }
    uint32_t context() const { return context_; }
    const SessionOptions& options() const { return options_; }
    void set_router(RouterKind kind) { options_.router = kind; }
    // SessionOptions::predict_experts, between evals.
    void set_predict_experts(bool on) { options_.predict_experts = on; }
    // Records arrive per token and layer. A batched eval delivers a chunk layer by layer (within a layer by
    // position) and splits each stage's time evenly among the chunk's tokens; when the observer asks for
    // counters, tokens are evaluated one at a time so counters stay per token. After its layers each token
    // gets a TokenTiming.
    void set_observer(TraceObserver* observer) { observer_ = observer; }

private:
    // A run of rows of one session (a part of a batch, or the whole chunk of eval).
    struct Part {
        Session* session;
        uint32_t row, count;
    };
    Status check_input(std::span<const int32_t> tokens) const;
    // Evaluates tokens [0, n) at positions position_.. (n <= chunk capacity); with_logits computes the
    // logits of the last one.
    Status eval_chunk(const int32_t* tokens, uint32_t n, bool with_logits);
    // The chunk's steps: embeddings into rows [row, row + n) of x_; this session's rotations for n positions;
    // the layers over n rows (each part's attention in its own session); the logits after one row, into
    // owner's logits.
    void embed(const int32_t* tokens, uint32_t n, uint32_t row);
    void rope_rows(uint32_t n);
    Status layers(std::span<const Part> parts, uint32_t n);
    void logits_of(uint32_t row, Session& owner);
    // Makes the KV cache's pages for positions [0, end) resident, in steps that at least double the resident
    // span (kKvMinStep positions or more), so that no page fault falls inside a chunk's hot loops. An error
    // when the system has no memory for them (the session stays where it was).
    Status populate_kv(uint32_t end);
    void attention(uint32_t layer, const LayerWeights& w, uint32_t n);
    // DeepSeek's multi-head latent attention, absorbed: the cache holds each position's kv latent and shared
    // rope key; queries are taken into the latent space (k_b) and the heads' outputs out of it (v_b).
    void latent_attention(uint32_t layer, const LayerWeights& w, uint32_t n);
    // Scores of `heads` query heads (q, rows of key_dim floats) against positions [lo, n_pos) of a layer's
    // transposed key cache, softmax (with the heads' sinks), into score rows of `ls` floats.
    void attention_scores(const float* kc, uint32_t key_dim, uint32_t ring, uint32_t lo, uint32_t n_pos, const float* q,
                          uint32_t heads, const float* sinks, float scale, float* sc, size_t ls) const;
    Status moe(uint32_t layer, const LayerWeights& w, uint32_t n);
    // The routed experts of a chunk through the expert cache, in groups that fit in the layer's slots.
    Status cached_experts(uint32_t layer, uint32_t n, ExpertCache& cache);
    // A layer's router on `n` rows of input: per token its top-k experts and their weights into selected / weights;
    // the logits, scores, selection values and groups into router_logits_, router_probs_, selection_, groups_.
    void route_chunk(const LayerWeights& w, const float* input, uint32_t n, int32_t* selected, float* weights);
    // The TokenTiming of `count` positions from `first` evaluated together: each gets an even share of the body,
    // the last one the head (final norm and lm head) as well.
    static void report_token_timing(TraceObserver& observer, uint32_t first, uint32_t count, uint64_t body_ns, uint64_t head_ns);
    // Whether MoE layers' experts are predicted ahead (SessionOptions::predict_experts, or a prefetching cache).
    bool predicting() const;
    // Expert cache prefetch: predicts the next MoE layer's experts for the chunk (predicted_next_, predicted_layer_).
    void predict_next_layer(uint32_t layer, uint32_t n);
    // The first MoE layer has no MoE layer before it: its experts are predicted from the chunk's embeddings
    // before the first layer runs, and a prefetching cache starts reading them at once.
    void predict_first_moe_layer(uint32_t n);
    // Layer `target`'s router on the residual stream as it is now, under that layer's norm (predicted_next_).
    void predict_layer(uint32_t target, uint32_t n);
    // SwiGLU over n rows of x (stride hidden) into out (stride hidden).
    void ffn(const FfnWeights& w, const float* x, uint32_t n, float* out);
    // y[i * W.rows + r] = row r of W · x_i for i < n: one read of W for all n vectors.
    void matmul(const TensorView& w, const float* x, uint32_t n, float* y);

    const Model& model_;
    ThreadPool& pool_;
    SessionOptions options_;
    uint32_t context_ = 0;
    uint32_t capacity_ = 1;  // tokens per chunk the buffers hold
    uint32_t position_ = 0;
    TraceObserver* observer_ = nullptr;
    // Whose token each row of the current chunk is (its observer and position): this session's, or in
    // eval_batch each part's session.
    struct RowOwner {
        TraceObserver* observer;
        uint32_t position;
    };
    std::vector<RowOwner> rows_;  // capacity_ rows
    bool observed_ = false;       // some row has an observer
    std::vector<Part> parts_;  // eval_batch's, reserved for capacity_ parts
    uint64_t router_ns_ = 0;  // router time of the current layer, for LayerTiming
    std::unique_ptr<ExpertPrefetcher> prefetcher_;

    // Per-token rows, capacity_ of each: [token][dim].
    static constexpr uint32_t kKeyBlock = 64;  // positions per block of the transposed keys
    static constexpr uint32_t kKvMinStep = 256;
    uint32_t kv_resident_ = 0;  // positions whose KV cache pages populate_kv has made resident
    // One layer's part of the caches. A full-attention layer keeps every position; a sliding-window layer a
    // ring of `held` positions (its window plus a chunk, whole key blocks: position p lives in slot p % held); an MLA
    // layer one "head" whose key is the kv latent and rope key and whose value is the latent.
    struct LayerCache {
        size_t k_offset = 0, v_offset = 0;  // floats into k_cache_ / v_cache_
        uint32_t heads = 0, key_dim = 0, value_dim = 0;
        uint32_t held = 0;                  // positions held (a multiple of kKeyBlock)
        uint32_t window = 0;                // 0: all positions; else the last `window` positions are attended
    };
    std::vector<LayerCache> caches_;
    uint32_t max_slots_ = 0;  // the longest score row
    ZeroPageBuffer<float> k_cache_;  // per layer [kv head][block][key_dim][kKeyBlock] (keys transposed per block)
    ZeroPageBuffer<float> v_cache_;  // per layer [kv head][slot][value_dim]
    ActivationBuffer<float> x_, h_, q_, k_, v_, att_, proj_, scores_, q_low_;  // scores_: [pool part][group head][whole key blocks]
    ActivationBuffer<float> gate_, up_, expert_in_, ffn_out_, moe_out_, router_logits_, router_probs_;
    ActivationBuffer<float> shared_gate_, shared_gate_up_, shared_out_;  // qwen2_moe's shared expert
    ActivationBuffer<float> rope_cos_, rope_sin_;  // [chunk token][rotary_dim / 2]: the chunk's rotations, once per eval
    ActivationBuffer<float> values_;   // [pool part][window][value_dim]: a sliding layer's values in position order
    ActivationBuffer<float> latent_q_, latent_out_;  // MLA: [token][head][kv_lora + rope], [token][head][kv_lora]
    ActivationBuffer<float> selection_;  // [token][k] the values experts were selected by
    std::vector<uint32_t> groups_;       // [token][topk_group] the groups selection was limited to
    std::vector<int32_t> selected_;  // [token][k]
    std::vector<float> selected_w_;
    // The chunk's tokens grouped by expert: for expert e, expert_rows_[e * capacity_ + r] = token * k + slot.
    std::vector<uint32_t> expert_rows_, expert_count_;
    std::vector<uint32_t> expert_block_;  // first row of expert e's block in expert_in_ / gate_ / up_ / ffn_out_
    std::vector<MatmulJob> jobs_;         // reserved for every expert's down projection and the shared expert's
    std::vector<GatedJob> gated_jobs_;    // reserved for every expert's gate/up projections and the shared expert's
    std::vector<uint32_t> chosen_;    // the chunk's experts at a layer, ascending (expert cache)
    // Expert cache prefetch: the next MoE layer's router applied to this layer's hidden state (predict_in_, the
    // residual under the next layer's norm), its choices per token and their union, ascending (predicted_next_).
    ActivationBuffer<float> predict_in_;
    std::vector<int32_t> predict_selected_;
    std::vector<float> predict_w_;
    std::vector<uint8_t> predict_mark_;
    std::vector<uint32_t> predicted_next_;
    int32_t predicted_layer_ = -1;  // the layer predicted_next_ is for; -1: none
    std::vector<int32_t> predicted_;  // [layer][k]: the last token's experts, the guess for the next token
    std::vector<float> logits_;
};

}  // namespace colibri
