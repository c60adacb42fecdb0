// A loaded model: the mapped file, tensor views into it per layer, tokenizer and chat template. Nothing here
// changes after load except expert weights replaced through swap_expert(); per-conversation state lives in
// Session.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/cache/expert_cache.h"
#include "engine/distributed/expert_parallel.h"
#include "engine/cache/expert_source.h"
#include "engine/core/generation_defaults.h"
#include "engine/core/rope.h"
#include "engine/core/router.h"
#include "engine/core/swap_lock.h"
#include "engine/file/model_file.h"
#include "engine/file/schema.h"
#include "engine/text/tokenizer.h"

namespace colibri {

// How the model's attention prepares q and k, decided at load as the routing rules are.
enum class QkNorm : uint8_t { None, WholeProjection, PerHead };
struct AttentionRules {
    QkNorm qk_norm = QkNorm::None;  // olmoe: RMSNorm over all heads' q (and k); qwen3_moe, glm4_moe: per head
    float clip_qkv = 0.0f;          // > 0: q, k and v clamped to ±clip_qkv (olmoe)
    RopeStyle rope_style = RopeStyle::Halves;
    uint32_t rotary_dim = 0;        // dims RoPE rotates per head: the first ones, or MLA's rope part
    uint32_t sliding_window = 0;    // positions a sliding layer attends to (gpt_oss)
    bool sinks = false;             // a learned logit per head joins every softmax (gpt_oss)
    bool mla = false;               // multi-head latent attention (deepseek_v3)
    uint32_t q_lora_rank = 0, kv_lora_rank = 0, v_head_dim = 0;  // MLA
    bool output_gate = false;       // the output times sigmoid(q_gate · x) before o (qwen3_next, qwen3_5_moe)
    bool linear_tiled = false;      // Gated DeltaNet value head j reads key head j % key heads (else j / ratio)
};

// What a layer mixes its positions with, decided at load per layer (LayerWeights::mixer): softmax attention over
// a KV cache, or DeepSeek's multi-head latent attention over a cache of latents. Session::mix_tokens runs it and
// Session's cache plan gives it its state; Gated DeltaNet (Qwen3-Next's linear attention) keeps a conv state and a
// recurrent state per value head instead of a cache.
enum class TokenMixer : uint8_t { Attention, LatentAttention, GatedDeltaNet };

// Everything the forward pass does differently per family, decided at load (Model::rules()).
struct ModelRules {
    RoutingRules routing;
    AttentionRules attention;
    bool shared_expert_gated = false;  // the shared expert's output is scaled by sigmoid(gate · x) (qwen2_moe)
    // The MTP head's output hidden state, which a chained draft feeds back in, is after its final norm (Qwen3-Next,
    // Qwen3.5: the norm is part of the head's layer) or before it (DeepSeek-V3, GLM: shared_head.norm is the lm head's).
    bool mtp_chain_normed = false;
    float swiglu_limit = 0.0f;  // > 0: gpt_oss's clamped activation (up + 1) · gate · σ(1.702 · gate), with biases
};

struct LayerWeights {
    TokenMixer mixer = TokenMixer::Attention;
    const TensorView* attn_norm = nullptr;
    const TensorView* q = nullptr;
    const TensorView* k = nullptr;
    const TensorView* v = nullptr;
    const TensorView* o = nullptr;
    const TensorView* q_bias = nullptr;  // qwen2_moe
    const TensorView* k_bias = nullptr;
    const TensorView* v_bias = nullptr;
    const TensorView* o_bias = nullptr;  // gpt_oss
    const TensorView* q_norm = nullptr;  // olmoe: over the whole projection; qwen3_moe, glm4_moe: per head
    const TensorView* k_norm = nullptr;
    const TensorView* sinks = nullptr;   // gpt_oss: one logit per query head
    bool sliding = false;                // attends to the last sliding_window positions only (gpt_oss)
    // Multi-head latent attention (deepseek_v3); q is q_b when there is a low-rank q path.
    const TensorView* q_a = nullptr;
    const TensorView* q_a_norm = nullptr;
    const TensorView* kv_a = nullptr;
    const TensorView* kv_a_norm = nullptr;
    const TensorView* k_b = nullptr;
    const TensorView* v_b = nullptr;
    const TensorView* q_gate = nullptr;  // qwen3_next: the attention output gate
    // Gated DeltaNet (session_deltanet.cpp): the q|k|v, z, beta (b) and alpha (a) projections, the conv1d [channels,
    // kernel], dt_bias, A = −exp(A_log) per value head, the gated norm's weight [value dim]; o is out_proj.
    const TensorView* lin_qkv = nullptr;
    const TensorView* lin_z = nullptr;
    const TensorView* lin_beta = nullptr;
    const TensorView* lin_alpha = nullptr;
    const TensorView* lin_conv = nullptr;
    const TensorView* lin_dt_bias = nullptr;
    const TensorView* lin_ssm_a = nullptr;
    const TensorView* lin_norm = nullptr;
    const TensorView* ffn_norm = nullptr;
    bool is_moe = false;
    const TensorView* router = nullptr;
    const TensorView* router_bias = nullptr;     // gpt_oss: added to the logits
    const TensorView* selection_bias = nullptr;  // deepseek_v3, glm4_moe: e_score_correction_bias
    std::vector<FfnWeights> experts;
    FfnWeights shared_expert;                   // qwen2_moe
    const TensorView* shared_expert_gate = nullptr;
    FfnWeights dense;                           // dense (non-MoE) layer
    // A multi-token-prediction layer's own (null in the decoder layers): the norms of the token's embedding and of
    // the hidden state it is joined with, their projection [hidden, 2 hidden], the norm before the lm head.
    const TensorView* mtp_enorm = nullptr;
    const TensorView* mtp_hnorm = nullptr;
    const TensorView* mtp_eh_proj = nullptr;
    const TensorView* mtp_norm = nullptr;
};

// The cache wing (engine/cache/) reads a model as an ExpertSource: its file and each layer's routed experts.
class Model final : public ExpertSource {
public:
    static Result<std::unique_ptr<Model>> load(const std::string& path);

    const ModelFile& file() const override { return *file_; }
    std::span<const FfnWeights> routed_experts(uint32_t layer) const override { return layers_[layer].experts; }
    const format::HyperParams& hparams() const { return file_->hparams(); }
    format::Family family() const { return file_->family(); }
    // The decoder layers (n_layers), then the multi-token-prediction layers (HyperParams::mtp_layers; empty without a head).
    std::span<const LayerWeights> layers() const { return std::span<const LayerWeights>(layers_).first(hparams().n_layers); }
    std::span<const LayerWeights> mtp_layers() const { return std::span<const LayerWeights>(layers_).subspan(hparams().n_layers); }
    const TensorView& embedding() const { return *embed_; }
    const TensorView& output_norm() const { return *output_norm_; }
    const TensorView& lm_head() const { return *lm_head_; }
    // Null when the file carries no tokenizer (e.g. converted from a directory without tokenizer.json).
    const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
    const std::string& chat_template() const { return chat_template_; }
    // The sampling its generation_config.json recommends (format 2.4; empty for older files and models without one).
    const GenerationDefaults& generation_defaults() const { return generation_defaults_; }
    const RopeTable& rope() const { return rope_; }
    uint32_t moe_layer_count() const;
    const ModelRules& rules() const { return rules_; }

    // Expert hot-swap: replaces the weights of expert `expert` in `layer` with those of expert
    // (donor_layer, donor_expert) of `donor`, which must have the same tensor types and shapes (and an intact
    // checksum). Safe while sessions on other threads evaluate: it waits for the token in flight and holds
    // the next one back until the copy is done; only that expert's pages are made writable for the copy.
    Status swap_expert(uint32_t layer, uint32_t expert, const ModelFile& donor, uint32_t donor_layer, uint32_t donor_expert);
    // Makes one routed expert's weights readable: decompresses its section on first use for a .bin.zst (once,
    // thread-safe); free for a .bin. Sessions call it before they touch the expert. Fails on a damaged frame.
    Status ensure_expert(uint32_t layer, uint32_t expert) const;
    // Models larger than RAM: from now on routed experts are read into a cache of slots within the budget
    // (engine/cache/expert_cache.h) instead of being used through the mapping. Call before any session evaluates.
    Status use_expert_cache(const ExpertCacheConfig& config);
    // Null without a RAM budget.
    ExpertCache* expert_cache() const { return expert_cache_.get(); }
    // Expert parallelism (engine/distributed/): sessions compute only this rank's experts and exchange the outputs.
    // Null in one process; set before any session evaluates, and outlives them.
    void set_expert_parallel(ExpertParallel* parallel) { expert_parallel_ = parallel; }
    ExpertParallel* expert_parallel() const { return expert_parallel_; }
    // What a placement must fit: the decoder layers, which are MoE layers, the routed experts.
    PlacementShape placement_shape() const;
    // What ranks compare before the first token: the metadata checksum (which covers every section's checksum) and
    // the file's size, read without touching a weight.
    uint64_t fingerprint() const;
    // Sessions hold this shared while they evaluate a token.
    SwapLock& swap_lock() const { return swap_lock_; }

private:
    Status bind();
    void decide_rules();
    // Where a tensor of the schema is bound; nullptr for a role this model has no place for.
    const TensorView** slot(const schema::TensorSpec& spec);
    std::unique_ptr<ModelFile> file_;
    std::vector<LayerWeights> layers_;  // the decoder layers, then the MTP layers
    const TensorView* embed_ = nullptr;
    const TensorView* output_norm_ = nullptr;
    const TensorView* lm_head_ = nullptr;
    std::optional<Tokenizer> tokenizer_;
    std::string chat_template_;
    GenerationDefaults generation_defaults_;
    RopeTable rope_;
    ModelRules rules_;
    mutable SwapLock swap_lock_;
    std::unique_ptr<ExpertCache> expert_cache_;
    ExpertParallel* expert_parallel_ = nullptr;
};

// The one context check of every front end: a session of `context` positions (0: the default) on this model.
// "context N exceeds the model's maximum of M".
Status check_context(const Model& model, uint32_t context);
// The one token-id check: every id within the model's vocabulary ("token id N out of range (vocabulary V)").
Status check_token_ids(const Model& model, std::span<const int32_t> ids);

}  // namespace colibri
