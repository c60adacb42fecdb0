// What each architecture family is: its name, the hyper-parameters it needs and every tensor it binds, with the
// shape the hyper-parameters imply and the section the writer puts it in. Model::bind and `colibri check`
// (through engine/file/file_rules) and the converters' plans (tools/convert_hf, tools/convert_gguf) all read this, so a
// family's facts live here once (docs/FORMAT.md, "Tensor names", is its prose).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/file/format.h"

namespace colibri {

// Tensor names inside a .bin (shared by the writer, the converter and the model).
namespace tensor_names {
std::string layer(uint32_t layer, std::string_view what);                       // "layers.3.attn.q"
std::string expert(uint32_t layer, uint32_t expert, std::string_view proj);     // "layers.3.experts.5.down"
}  // namespace tensor_names

}  // namespace colibri

namespace colibri::schema {

inline constexpr uint32_t kMaxExperts = 4096;  // experts per layer: the router's bound (engine/core/router.cpp) and the converters'
inline constexpr uint32_t kMaxMtpLayers = 4;   // multi-token-prediction layers (real models ship one)

struct FamilyInfo {
    format::Family id;
    const char* name;  // the .bin's family name, also the Hugging Face model_type
};

// Every family this build knows, in id order.
std::span<const FamilyInfo> families();
const FamilyInfo* find_family(uint32_t id);  // nullptr when unknown
const FamilyInfo* find_family(std::string_view name);
std::string family_names();  // "mixtral, qwen2_moe, olmoe, ..." for messages

}  // namespace colibri::schema

// A .bin's family by name and back, read from the family table above ("unknown" / false for none).
namespace colibri::format {
const char* family_name(Family f);
bool family_from_name(std::string_view name, Family* out);
}  // namespace colibri::format

namespace colibri::schema {

// What a tensor is for: Model::bind binds each role to its place in LayerWeights.
enum class Role : uint8_t {
    Embed, OutputNorm, LmHead,
    AttnNorm, Q, K, V, O, QBias, KBias, VBias, OBias, QNorm, KNorm, Sinks, FfnNorm,
    QA, QANorm, KvA, KvANorm, KB, VB,  // multi-head latent attention (deepseek_v3)
    Router, SharedExpertGate, RouterBias, SelectionBias,
    ExpertGate, ExpertUp, ExpertDown, ExpertGateBias, ExpertUpBias, ExpertDownBias,
    SharedGate, SharedUp, SharedDown,
    DenseGate, DenseUp, DenseDown,
    QGate,  // qwen3_next's attention output gate
    LinQkv, LinZ, LinBeta, LinAlpha, LinConv, LinDtBias, LinSsmA, LinNorm,  // Gated DeltaNet (linear attention)
    MtpEnorm, MtpHnorm, MtpEhProj, MtpNorm,  // the multi-token-prediction head's own (format 2.3)
};

enum class Kind : uint8_t {
    Matrix,       // 2-d in any matrix weight type
    ExactMatrix,  // 2-d in any matrix type; converters keep it f32 (the router: near-ties must not flip)
    Vector,       // 1-d, f32 only (norms, biases)
};

struct TensorSpec {
    std::string name;  // e.g. "layers.3.experts.5.down" (docs/FORMAT.md, "Tensor names")
    Role role;
    Kind kind;
    uint64_t rows = 0;
    uint64_t cols = 1;  // 1 for vectors
    format::SectionKind section;
    uint32_t layer = format::kNone;
    uint32_t expert = format::kNone;
    uint32_t n_dims() const { return kind == Kind::Vector ? 1 : 2; }
    std::vector<uint64_t> shape() const { return kind == Kind::Vector ? std::vector<uint64_t>{rows} : std::vector<uint64_t>{rows, cols}; }
};

// Whether layer l is a Gated DeltaNet (linear-attention) layer: the hybrids' layers but every
// full_attention_interval-th. The multi-token-prediction layers (l >= n_layers) are softmax attention.
inline bool is_linear_layer(const format::HyperParams& hp, uint32_t l) {
    return l < hp.n_layers && hp.linear_key_heads != 0 && hp.full_attention_interval != 0 && (l + 1) % hp.full_attention_interval != 0;
}
// Channels of a Gated DeltaNet layer's conv1d: q and k of every key head, v of every value head.
inline uint64_t linear_conv_channels(const format::HyperParams& hp) {
    return 2 * uint64_t(hp.linear_key_heads) * hp.linear_key_dim + uint64_t(hp.linear_value_heads) * hp.linear_value_dim;
}

// Whether the family ships a multi-token-prediction head that the format holds (HyperParams::mtp_layers).
bool family_has_mtp(uint32_t family);

// Why the hyper-parameters (with which layers are MoE: n_layers + mtp_layers entries) are unusable for the family, one line each without a
// prefix; empty when the engine can bind a model with them.
std::vector<std::string> hyperparam_problems(uint32_t family, const format::HyperParams& hp, const std::vector<bool>& layer_is_moe);

// The fewest tensors a model with these layers needs: a damaged count must not make a checker allocate the
// whole list (n_layers × n_experts from a hostile header could be billions).
uint64_t minimum_tensor_count(const format::HyperParams& hp, const std::vector<bool>& layer_is_moe);

// Every tensor the family binds, in the order the writer lays them out: embedding; per layer its attention
// section, then router, experts and shared expert (MoE) or its dense MLP; the output section. The
// hyper-parameters must be usable (hyperparam_problems empty).
std::vector<TensorSpec> tensors(format::Family family, const format::HyperParams& hp, const std::vector<bool>& layer_is_moe);

}  // namespace colibri::schema
