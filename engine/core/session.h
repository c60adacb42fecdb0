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

struct AttentionShape;  // session_attention.cpp
struct LatentShape;
class SessionMirror;   // session_mirror.h

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

    // Gated DeltaNet hybrids: snapshots of the recurrent and conv states that truncate() restores (at most this many,
    // the oldest dropped first), taken at the end of each multi-token eval (a prompt; in eval_batch each part of more
    // than one token) and at every multiple of checkpoint_interval that a chunk ends on (eval cuts its chunks there).
    // Each costs the model's linear-attention state (Qwen3.5-35B-A3B: about 60 MB; `colibri info` says per layer).
    uint32_t state_checkpoints = 4;
    uint32_t checkpoint_interval = 1024;

    // Run the model's multi-token-prediction head (HyperParams::mtp_layers) alongside every eval, so that mtp_draft
    // can guess the tokens ahead: one more decoder layer per evaluated token, its KV cache, and the main model's
    // final hidden state per position (hidden_size floats each). Ignored for a model without a head.
    bool mtp = false;

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
        // A speculative check (as verify(): at most verify_room() tokens, every row's logits in verify_logits(),
        // keep_verified() after).
        bool verify = false;
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

    // Speculative decoding's check (session_verify.cpp). reserve_verify sizes what verify() needs for up to `rows`
    // tokens (at most chunk_capacity()), once, outside the hot path.
    void reserve_verify(uint32_t rows);
    // Tokens the next verify() may take: the reserved rows and the positions left; a hybrid's step also ends at its
    // next checkpoint position, as eval's chunks do, so that speculation keeps the checkpoints plain decoding makes.
    uint32_t verify_room() const;
    // Evaluates tokens (at most verify_room()) in one chunk and returns the logits after each, [token][vocab]: row
    // i is bit for bit what eval() gives after tokens[i]. Valid until the next call; keep_verified() must follow.
    Result<std::span<const float>> verify(std::span<const int32_t> tokens);
    // The last check's rows (verify, or an eval_batch part with `verify`), [token][vocab].
    std::span<const float> verify_logits() const {
        return {verify_logits_.data(), size_t(verify_count_) * model_.hparams().vocab_size};
    }
    // After verify(): keeps its first `keep` tokens (1 <= keep <= their count) and drops the rest. A KV cache is cut
    // back; a hybrid's linear-attention states go back to before verify() and the kept tokens' steps are replayed
    // from the inputs verify() kept: no weight is read again and no checkpoint is touched. Never fails.
    void keep_verified(uint32_t keep);
    // Distinct experts run, summed over MoE layers and chunks: a chunk's layer reads the union of its tokens'
    // choices (speculation's verify steps read more experts per layer than one token's top-k).
    struct ExpertReads {
        uint64_t experts = 0, layer_passes = 0;
    };
    ExpertReads expert_reads() const { return expert_reads_; }
    // An expert-parallel run's MoE exchanges so far (Model::expert_parallel; all zero in one process).
    const ExchangeStats& exchange_stats() const { return exchange_stats_; }

    void reset();
    // Drops everything after n tokens (regenerate from an earlier point). A KV cache is cut back at once; a Gated
    // DeltaNet hybrid's recurrent state cannot be, so the latest state checkpoint at or before n is restored and the
    // tokens from there to n evaluated again (position 0 when none is left). On an error (an expert the cache could
    // not read) the session is reset and the error returned.
    Status truncate(uint32_t n);
    uint32_t position() const { return position_; }
    const Model& model() const { return model_; }
    uint32_t context() const { return context_; }
    const SessionOptions& options() const { return options_; }
    void set_router(RouterKind kind);
    // Expert parallelism (engine/core/session_mirror.h): rank 0's session tells `mirror` each operation here that
    // changes it (eval, eval_batch, verify, reserve_verify, keep_verified, reset, truncate, set_router) before doing
    // it, as slot `slot`, so that the other ranks' sessions (follow_slots, session_follow.h) do the same and every
    // MoE exchange happens on every rank in the same order; an evaluation the mirror could not tell fails with its
    // error. Null: none (one process, or a follower's own session). mtp_draft is rank 0's alone (the head's layer
    // exchanges nothing). A counting observer (TraceObserver::counters) is not for mirrored sessions.
    void set_mirror(SessionMirror* mirror, uint32_t slot = 0) { mirror_ = mirror, mirror_slot_ = slot; }
    SessionMirror* mirror() const { return mirror_; }
    // SessionOptions::predict_experts, between evals.
    void set_predict_experts(bool on) { options_.predict_experts = on; }
    // Records arrive per token and layer. A batched eval delivers a chunk layer by layer (within a layer by
    // position) and splits each stage's time evenly among the chunk's tokens; when the observer asks for
    // counters, tokens are evaluated one at a time so counters stay per token. After its layers each token
    // gets a TokenTiming.
    void set_observer(TraceObserver* observer) { observer_ = observer; }

    // The multi-token-prediction head (session_mtp.cpp), on when SessionOptions::mtp asked for it and the model has one.
    // Its layer lags the model by one position: its row q joins the model's hidden state at q with the token at q + 1,
    // so each eval fills the rows its tokens complete, and truncate/reset cut them back with the KV cache.
    // eval_batch does not feed the head: a session evaluated in a batch turns it off until reset().
    bool mtp_enabled() const { return mtp_; }
    // The model's final hidden state at `position` (after its output norm, as the lm head reads it), for position <
    // position(); empty without the head.
    std::span<const float> final_hidden(uint32_t position) const;
    // Greedy drafts of the tokens after `next`, the token about to be fed at position(): the head's row at
    // position() - 1 with `next` gives the first, each further one chains the head's own output hidden state with the
    // draft before it. Returns how many were written (0 at position 0, without the head, or when the context is
    // full); the head's rows past position() - 1 are dropped again. The head's logits of the last draft stay in
    // mtp_logits().
    Result<uint32_t> mtp_draft(int32_t next, std::span<int32_t> drafts);
    std::span<const float> mtp_logits() const { return mtp_logits_; }

    // A Gated DeltaNet layer's recurrent state, [value head][key dim][value dim] (empty for any other layer): for
    // inspection and tests, valid until the next eval.
    std::span<const float> linear_recurrent_state(uint32_t layer) const;
    // The positions of a hybrid's state checkpoints, ascending (for inspection and tests).
    std::vector<uint32_t> checkpoint_positions() const;

    // Positions per block of the KV cache's transposed keys.
    static constexpr uint32_t kKeyBlock = 64;

private:
    // A run of rows of one session (a part of a batch, or the whole chunk of eval).
    struct Part {
        Session* session;
        uint32_t row, count;
    };
    // Construction: each layer's share of the caches (by its token mixer), then the scratch buffers.
    void plan_caches();
    void size_buffers();
    Status check_input(std::span<const int32_t> tokens) const;
    // eval and reset without telling the mirror (truncate's re-evaluation is part of the truncation it told).
    Result<std::span<const float>> evaluate(std::span<const int32_t> tokens);
    void clear();
    // Evaluates tokens [0, n) at positions position_.. (n <= chunk capacity); with_logits computes the
    // logits of the last one, every_row those of each into verify_logits_ (speculation's check).
    Status eval_chunk(const int32_t* tokens, uint32_t n, bool with_logits, bool every_row = false);
    // Makes the KV cache's pages for positions [0, end) resident, in steps that at least double the resident
    // span (kKvMinStep positions or more), so that no page fault falls inside a chunk's hot loops. An error
    // when the system has no memory for them (the session stays where it was).
    Status populate_kv(uint32_t end);

    // The forward pass (session.cpp), in the order it runs: embeddings into rows [row, row + n) of x_; this
    // session's rotations for n positions; the layers over n rows (each part's token mixer in its own session);
    // the logits after one row, into owner's logits.
    void embed(const int32_t* tokens, uint32_t n, uint32_t row);
    void rope_rows(uint32_t n);
    // Per layer: norm -> token mixer -> residual -> norm -> MoE or dense FFN -> residual.
    Status layers(std::span<const Part> parts, uint32_t n);
    // One decoder layer over n rows of x_ (t1: when its token mixer is done, for LayerTiming).
    Status decoder_layer(std::span<const Part> parts, uint32_t layer, const LayerWeights& w, uint32_t n, uint64_t* t1);
    // The MTP head (session_mtp.cpp): after a chunk of n tokens from position `first`, the model's hidden states kept
    // and the head's rows that the chunk's tokens complete; the head's layer over m rows of mtp_in_ at positions
    // from `first`; the head's input rows (enorm of the token's embedding, hnorm of a hidden state).
    Status mtp_follow(const int32_t* tokens, uint32_t first, uint32_t n);
    Status mtp_layer(uint32_t first, uint32_t m);
    void mtp_input(uint32_t row, int32_t token, const float* hidden);
    void size_mtp_buffers();
    // rmsnorm of rows [0, n) of the residual stream x_ with `weight`, into out.
    void norm_rows(const TensorView& weight, uint32_t n, float* out);
    // x_ += y over n rows.
    void add_residual(const float* y, uint32_t n);
    // The layer's token mixer (LayerWeights::mixer) on each part's rows of h_, in that part's session, into
    // the parts' rows of proj_.
    void mix_tokens(std::span<const Part> parts, uint32_t layer, const LayerWeights& w);
    // The layer's feed-forward block on h_ into moe_out_: the MoE, or a dense SwiGLU.
    Status feed_forward(uint32_t layer, const LayerWeights& w, uint32_t n);
    // A layer's LayerTiming per row (and its counters) to the rows' observers.
    void report_layer(uint32_t layer, uint32_t n, uint64_t t0, uint64_t t1, CounterSource* counters);
    void logits_of(uint32_t row, Session& owner);
    // The TokenTiming of `count` positions from `first` evaluated together: each gets an even share of the body,
    // the last one the head (final norm and lm head) as well.
    static void report_token_timing(TraceObserver& observer, uint32_t first, uint32_t count, uint64_t body_ns, uint64_t head_ns);

    // Softmax attention (session_attention.cpp): h_ rows -> proj_ rows, at this session's positions in its cache.
    // q, k and v projected; each token's rows prepared (bias, the family's q/k norm, clip, RoPE) and stored in the
    // cache; each query head attends over its positions (the window and sinks where the layer has them); the
    // output projection.
    void attention(uint32_t layer, const LayerWeights& w, uint32_t n);
    // When the KV heads split evenly among the pool's parts: each part projects, prepares and attends its heads,
    // in one hand-off.
    void attention_by_kv_heads(const AttentionShape& a, uint32_t n);
    void prepare_qkv(const AttentionShape& a, uint32_t n, uint32_t kv0, uint32_t kv1);
    // Every (token, KV head) pair of the chunk, split among the pool's parts (query heads too when pairs are few).
    void attend_chunk(const AttentionShape& a, uint32_t n);
    // Token t's query heads [j0, j1) of KV head kvh over its positions, with the score rows of pool part `part`.
    void attend(const AttentionShape& a, size_t part, uint32_t t, uint32_t kvh, uint32_t j0, uint32_t j1);
    // DeepSeek's multi-head latent attention, absorbed: the cache holds each position's kv latent and shared
    // rope key; queries are taken into the latent space (k_b) and the heads' outputs out of it (v_b).
    void latent_attention(uint32_t layer, const LayerWeights& w, uint32_t n);
    void project_latent(const LayerWeights& w, uint32_t n);
    void prepare_latent(const LatentShape& m, const LayerWeights& w, uint32_t n);
    void attend_latent(const LatentShape& m, const LayerWeights& w, uint32_t n);
    // qwen3_next's gated attention: att_ times sigmoid(q_gate · h) per element.
    void gate_attention_output(const LayerWeights& w, uint32_t n);
    // Gated DeltaNet (session_deltanet.cpp): the q|k|v, z, b, a projections of the chunk; the causal conv1d over
    // the layer's conv state and the chunk, SiLU; q and k L2-normalised; each value head's recurrence through the
    // chunk's tokens in order (heads split among the pool's parts); the gated RMSNorm; the output projection.
    void gated_deltanet(uint32_t layer, const LayerWeights& w, uint32_t n);
    void size_linear_buffers();
    // The delta rule of n tokens (conv rows, β, decays) on the recurrent states, outputs into out; norms (observed)
    // each head's state norm after each token.
    void delta_recurrence(float* recurrent, const float* conv, const float* beta, const float* decay, uint32_t n, float* out, float* norms);
    // After a chunk of n tokens (session_checkpoints.cpp): the hybrid's token history, and a state checkpoint at a
    // multiple of checkpoint_interval or at the end of a prompt.
    void after_chunk(const int32_t* tokens, uint32_t n, bool prompt_end);
    void save_checkpoint();
    // Tokens a chunk starting now may take so that it ends at the next checkpoint position.
    uint32_t chunk_limit(uint32_t n) const;
    static size_t linear_state_floats(const format::HyperParams& hp);
    // att_ through the output projection (and its bias) into proj_; the router's weights asked for meanwhile.
    void output_projection(const LayerWeights& w, uint32_t n);

    // The MoE block (session_moe.cpp): route, group the chunk's tokens by expert, run the routed experts (and
    // the shared expert), combine each token's expert outputs into moe_out_.
    Status moe(uint32_t layer, const LayerWeights& w, uint32_t n);
    // The layer's router on h_ into selected_ / selected_w_, timed and reported to the rows' observers.
    void route(uint32_t layer, const LayerWeights& w, uint32_t n);
    // A layer's router on `n` rows of input: per token its top-k experts and their weights into selected / weights;
    // the logits, scores, selection values and groups into router_logits_, router_probs_, selection_, groups_.
    void route_chunk(const LayerWeights& w, const float* input, uint32_t n, int32_t* selected, float* weights);
    // The chunk's (token, slot) choices per expert (expert_rows_, expert_count_), each chosen expert's block of rows
    // (expert_block_) and the chosen experts ascending (chosen_).
    void group_by_expert(uint32_t n);
    // madvise(WILLNEED) this layer's chosen experts and the previous token's choices at the next layer.
    void advise_experts(uint32_t layer, uint32_t n);
    // Each chosen expert's tokens' rows of h_ copied into its block of expert_in_ (a single token reads h_).
    void gather_expert_inputs(uint32_t n);
    const float* expert_input(uint32_t expert, uint32_t n) const;
    // The chosen experts' outputs into their blocks of ffn_out_ (down bias included), the shared expert's into
    // shared_out_ (its gate into shared_gate_). The one place that decides how the routed experts run: through
    // the mapping in two hand-offs with the shared expert, one at a time when the observer counts per expert, or
    // through the expert cache group by group. Only computed_ run: in an expert-parallel run this rank's share.
    Status run_experts(uint32_t layer, const LayerWeights& w, uint32_t n);
    Status mapped_experts(uint32_t layer, const LayerWeights& w, uint32_t n);
    Status counted_experts(uint32_t layer, const LayerWeights& w, uint32_t n, CounterSource& counters);
    // Through the expert cache, in groups that fit in the layer's slots.
    Status cached_experts(uint32_t layer, uint32_t n, ExpertCache& cache);
    // The group's resident experts (misses = false) or its misses (true).
    void compute_cached(uint32_t layer, uint32_t n, ExpertCache& cache, std::span<const uint32_t> experts, bool misses);
    void report_cache(uint32_t layer, uint32_t n, const ExpertCache& cache, const ExpertCacheStats& before);
    // Queues expert e's gate/up job (gpt_oss: with biases and the clamped activation) and down job on its block.
    void queue_expert(const FfnWeights& f, uint32_t expert, uint32_t n);
    void queue_shared_expert(const LayerWeights& w, uint32_t n);
    // gpt_oss's down-projection bias on expert e's output rows.
    void add_down_bias(const FfnWeights& f, uint32_t expert);
    // Which of the chosen experts' rows this rank computes (share_begin_, share_rows_; computed_: those with rows):
    // all of them in one process or at the MTP head's layer, else its share under the placement.
    void share_experts(uint32_t layer, const ExpertParallel* parallel);
    // Whether this rank may read expert e of `layer` (always in one process).
    bool holds(uint32_t layer, uint32_t expert) const;
    // Every rank's computed rows of ffn_out_ to every rank, each into its place: ffn_out_ is then one process's. Each
    // rank's run_experts time (own_experts_ns_) travels behind its rows into rank_experts_ns_, reported with the
    // exchange's own time and bytes to the chunk's n rows' observers (RankTiming).
    Status exchange_expert_outputs(ExpertParallel& parallel, uint32_t layer, uint32_t n);
    void report_ranks(uint32_t layer, uint32_t n, uint64_t exchange_ns, uint64_t sent, uint64_t received);
    // moe_out_: per token its experts' outputs times their weights in ascending expert order, then the shared
    // expert (scaled by its sigmoid gate where the family has one).
    void combine_experts(const LayerWeights& w, uint32_t n);
    // SwiGLU over n rows of x (stride hidden) into out (stride hidden): a dense layer, the shared expert.
    void ffn(const FfnWeights& w, const float* x, uint32_t n, float* out);
    // Whether MoE layers' experts are predicted ahead (SessionOptions::predict_experts, or a prefetching cache).
    bool predicting() const;
    // Expert cache prefetch: predicts the next MoE layer's experts for the chunk (predicted_next_, predicted_layer_).
    void predict_next_layer(uint32_t layer, uint32_t n);
    // The first MoE layer has no MoE layer before it: its experts are predicted from the chunk's embeddings
    // before the first layer runs, and a prefetching cache starts reading them at once.
    void predict_first_moe_layer(uint32_t n);
    // Layer `target`'s router on the residual stream as it is now, under that layer's norm (predicted_next_).
    void predict_layer(uint32_t target, uint32_t n);

    // y[i * W.rows + r] = row r of W · x_i for i < n: one read of W for all n vectors.
    void matmul(const TensorView& w, const float* x, uint32_t n, float* y);

    const Model& model_;
    ThreadPool& pool_;
    SessionOptions options_;
    uint32_t context_ = 0;
    uint32_t capacity_ = 1;  // tokens per chunk the buffers hold
    uint32_t position_ = 0;
    TraceObserver* observer_ = nullptr;
    SessionMirror* mirror_ = nullptr;
    uint32_t mirror_slot_ = 0;
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
    uint64_t deltanet_ns_[kDeltaNetSteps] = {};  // a Gated DeltaNet layer's steps (observed), for LayerTiming
    std::unique_ptr<ExpertPrefetcher> prefetcher_;

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
        size_t state_offset = 0;            // Gated DeltaNet: floats into linear_state_ (conv state, then recurrent state)
    };
    std::vector<LayerCache> caches_;
    uint32_t max_slots_ = 0;  // the longest score row
    ZeroPageBuffer<float> k_cache_;  // per layer [kv head][block][key_dim][kKeyBlock] (keys transposed per block)
    ZeroPageBuffer<float> v_cache_;  // per layer [kv head][slot][value_dim]
    // Per-token rows, capacity_ of each: [token][dim]. x_ is the residual stream, h_ its normed rows.
    ActivationBuffer<float> x_, h_, q_, k_, v_, att_, proj_, scores_, q_low_;  // scores_: [pool part][group head][whole key blocks]
    ActivationBuffer<float> gate_, up_, expert_in_, ffn_out_, moe_out_, router_logits_, router_probs_;
    ActivationBuffer<float> shared_gate_, shared_gate_up_, shared_out_;  // qwen2_moe's shared expert
    ActivationBuffer<float> rope_cos_, rope_sin_;  // [chunk token][rotary_dim / 2]: the chunk's rotations, once per eval
    ActivationBuffer<float> values_;   // [pool part][window][value_dim]: a sliding layer's values in position order
    ActivationBuffer<float> latent_q_, latent_out_;  // MLA: [token][head][kv_lora + rope], [token][head][kv_lora]
    ActivationBuffer<float> attn_gate_;  // [token][q_dim]: qwen3_next's attention output gate
    // Gated DeltaNet: [conv kernel - 1 + token][channels] the conv's inputs (the state's rows, then the chunk's
    // projections), [token][channels] its output, [token][value dims] z, [token][value head] b and a (then β and
    // the decay), [pool part][value dim] the recurrence's scratch, [token][value head] the state's norms (observed).
    ActivationBuffer<float> lin_window_, lin_conv_, lin_z_, lin_b_, lin_a_, lin_scratch_, lin_norms_;
    // Per Gated DeltaNet layer (LayerCache::state_offset): the conv state [kernel - 1][channels] (the last inputs)
    // and the recurrent state [value head][key dim][value dim]; zeroed when a chunk starts at position 0.
    std::vector<float> linear_state_;
    bool recurrent_ = false;        // the model has Gated DeltaNet layers
    std::vector<int32_t> history_;  // hybrids: the token at each position [0, position_), for re-evaluation
    struct StateCheckpoint {
        uint32_t position;
        std::vector<float> state;  // linear_state_ at that position
    };
    std::vector<StateCheckpoint> checkpoints_;  // ascending positions
    ActivationBuffer<float> selection_;  // [token][k] the values experts were selected by
    std::vector<uint32_t> groups_;       // [token][topk_group] the groups selection was limited to
    std::vector<int32_t> selected_;  // [token][k]
    std::vector<float> selected_w_;
    // The chunk's tokens grouped by expert: for expert e, expert_rows_[e * capacity_ + r] = token * k + slot.
    std::vector<uint32_t> expert_rows_, expert_count_;
    std::vector<uint32_t> expert_block_;  // first row of expert e's block in expert_in_ / gate_ / up_ / ffn_out_
    std::vector<MatmulJob> jobs_;         // reserved for every expert's down projection and the shared expert's
    std::vector<GatedJob> gated_jobs_;    // reserved for every expert's gate/up projections and the shared expert's
    std::vector<uint32_t> chosen_;    // the chunk's experts at a layer, ascending
    // Of expert e's rows, this rank computes [share_begin_[e], + share_rows_[e]); computed_: the chosen experts it
    // computes any rows of, ascending.
    std::vector<uint32_t> share_begin_, share_rows_, computed_;
    // Expert parallelism: this rank's rows out, every rank's in (bytes, at most a chunk's token-expert rows each), the
    // byte count per rank and where each rank's next rows are in exchange_recv_.
    std::vector<uint8_t> exchange_send_, exchange_recv_;
    std::vector<size_t> exchange_counts_, exchange_at_;
    // This rank's run_experts time at the current layer, every rank's as the exchange brought it, and a token's share.
    uint64_t own_experts_ns_ = 0;
    std::vector<uint64_t> rank_experts_ns_, rank_share_ns_;
    ExchangeStats exchange_stats_;
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
    // The MTP head: on, and its rows [0, mtp_position_) in its cache; whether the row at mtp_position_ - 1 was a
    // draft's (with mtp_next_, the token it assumed); the model's final hidden state per position [context][hidden];
    // the head's inputs [chunk][2 hidden]; the hidden state a chained draft feeds back; the head's logits.
    bool mtp_ = false;
    uint32_t mtp_position_ = 0;
    bool mtp_row_drafted_ = false;
    int32_t mtp_next_ = -1;
    ZeroPageBuffer<float> mtp_hidden_;
    ActivationBuffer<float> mtp_in_, mtp_chain_;
    std::vector<float> mtp_logits_;
    ExpertReads expert_reads_;
    // verify() (session_verify.cpp): the rows' logits [row][vocab]; the position before the step; a hybrid's
    // linear-attention states then, and per Gated DeltaNet layer the step's conv window (state rows, then the
    // projections), conv outputs, β and decays, [layer slot][...], to replay the kept tokens' steps.
    uint32_t verify_rows_ = 0, verify_from_ = 0, verify_count_ = 0;
    std::vector<float> verify_logits_, verify_state_;
    std::vector<float> verify_window_, verify_conv_, verify_beta_, verify_decay_;
    std::vector<uint32_t> verify_slot_;  // per layer: its Gated DeltaNet slot in the verify_* buffers
    bool verifying_ = false;             // gated_deltanet keeps its inputs for the replay
    void logits_rows(uint32_t row, uint32_t n, Session& owner);  // rows [row, row + n) into owner's verify_logits_
    Status check_verify(std::span<const int32_t> tokens) const;
    void begin_verify(uint32_t n);  // the position and a hybrid's states before the step
    void end_verify(std::span<const int32_t> tokens, bool ok);
    void keep_deltanet_inputs(uint32_t layer, uint32_t n);
    void replay_deltanet(uint32_t layer, uint32_t keep);
};

}  // namespace colibri
