// A loaded model: the mapped file, tensor views into it per layer, tokenizer and chat template. Nothing here
// changes after load except expert weights replaced through swap_expert(); per-conversation state lives in
// Session.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model_file.h"
#include "router.h"
#include "schema.h"
#include "swap_lock.h"
#include "status.h"
#include "tokenizer.h"

namespace colibri {

struct FfnWeights {  // SwiGLU: down(silu(gate x) * up x)
    const TensorView* gate = nullptr;
    const TensorView* up = nullptr;
    const TensorView* down = nullptr;
};

// How the model's attention prepares q and k, decided at load as the routing rules are.
enum class QkNorm : uint8_t { None, WholeProjection };
struct AttentionRules {
    QkNorm qk_norm = QkNorm::None;  // olmoe: RMSNorm over all heads' q (and k) before RoPE
    float clip_qkv = 0.0f;          // > 0: q, k and v clamped to ±clip_qkv (olmoe)
};

// Everything the forward pass does differently per family, decided at load (Model::rules()).
struct ModelRules {
    RoutingRules routing;
    AttentionRules attention;
    bool shared_expert_gated = false;  // the shared expert's output is scaled by sigmoid(gate · x) (qwen2_moe)
};

struct LayerWeights {
    const TensorView* attn_norm = nullptr;
    const TensorView* q = nullptr;
    const TensorView* k = nullptr;
    const TensorView* v = nullptr;
    const TensorView* o = nullptr;
    const TensorView* q_bias = nullptr;  // qwen2_moe
    const TensorView* k_bias = nullptr;
    const TensorView* v_bias = nullptr;
    const TensorView* q_norm = nullptr;  // olmoe: RMSNorm over the whole projection
    const TensorView* k_norm = nullptr;
    const TensorView* ffn_norm = nullptr;
    bool is_moe = false;
    const TensorView* router = nullptr;
    std::vector<FfnWeights> experts;
    FfnWeights shared_expert;                   // qwen2_moe
    const TensorView* shared_expert_gate = nullptr;
    FfnWeights dense;                           // dense (non-MoE) layer
};

class Model {
public:
    static Result<std::unique_ptr<Model>> load(const std::string& path);

    const ModelFile& file() const { return *file_; }
    const format::HyperParams& hparams() const { return file_->hparams(); }
    format::Family family() const { return file_->family(); }
    const std::vector<LayerWeights>& layers() const { return layers_; }
    const TensorView& embedding() const { return *embed_; }
    const TensorView& output_norm() const { return *output_norm_; }
    const TensorView& lm_head() const { return *lm_head_; }
    // Null when the file carries no tokenizer (e.g. converted from a directory without tokenizer.json).
    const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
    const std::string& chat_template() const { return chat_template_; }
    const std::vector<float>& rope_inv_freq() const { return inv_freq_; }
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
    // Sessions hold this shared while they evaluate a token.
    SwapLock& swap_lock() const { return swap_lock_; }

private:
    Status bind();
    void decide_rules();
    // Where a tensor of the schema is bound; nullptr for a role this model has no place for.
    const TensorView** slot(const schema::TensorSpec& spec);
    std::unique_ptr<ModelFile> file_;
    std::vector<LayerWeights> layers_;
    const TensorView* embed_ = nullptr;
    const TensorView* output_norm_ = nullptr;
    const TensorView* lm_head_ = nullptr;
    std::optional<Tokenizer> tokenizer_;
    std::string chat_template_;
    std::vector<float> inv_freq_;
    ModelRules rules_;
    mutable SwapLock swap_lock_;
};

}  // namespace colibri
