// The .bin model format: on-disk structures shared by the reader (ModelFile) and the writer (BinWriter).
// docs/FORMAT.md is the specification; keep the two in step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/types.h"
#include "kernels/weight_types.h"

namespace colibri::format {

inline constexpr char kMagic[8] = {'C', 'O', 'L', 'I', 'B', 'R', 'I', '\x1a'};
inline constexpr uint16_t kVersionMajor = 2;
inline constexpr uint16_t kVersionMinor = 4;  // 2.1: the hyper-parameters of qwen3_moe, gpt_oss, deepseek_v3, glm4_moe;
                                              // 2.2: Gated DeltaNet hybrids (HyperParams' linear-attention fields);
                                              // 2.3: the multi-token-prediction head (HyperParams::mtp_layers);
                                              // 2.4: the generation_config section (sampling defaults)
// Format 1 differs from 2 only in the order of q4_K's codes (ggml's; 2 interleaves them, kernels/types.h), so a
// 1.x file without q4_K tensors reads as it is, and one with them is refused (q4_k_needs_reconversion).
inline constexpr uint16_t kOldestReadableMajor = 1;
inline bool version_readable(uint16_t major) { return major >= kOldestReadableMajor && major <= kVersionMajor; }
inline bool q4_k_needs_reconversion(uint16_t major, uint32_t weight_type) {
    return major < 2 && weight_type == static_cast<uint32_t>(WeightType::Q4_K);
}
inline constexpr uint64_t kSectionAlignment = 4096;  // each section is its own run of pages
inline constexpr uint64_t kTensorAlignment = 64;     // tensors inside a section, for SIMD loads
inline constexpr uint32_t kNone = 0xFFFFFFFFu;
inline constexpr size_t kTensorNameBytes = 64;

enum class Family : uint32_t { Mixtral = 1, Qwen2Moe = 2, Olmoe = 3, Qwen3Moe = 4, GptOss = 5, DeepseekV3 = 6, Glm4Moe = 7,
                             Qwen3Next = 8, Qwen35Moe = 9, MinimaxM2 = 10, Glm4MoeLite = 11 };

// Weight type of a tensor (declared with the kernels); the engine computes in f32 whatever the storage type.
using colibri::WeightType;

enum class SectionKind : uint32_t {
    Metadata = 0,        // header and tables (its checksum lives in the header)
    TokenizerJson = 1,   // tokenizer.json, verbatim
    TokenizerConfig = 2, // tokenizer_config.json, verbatim
    ChatTemplate = 3,    // the Jinja chat template text
    Embedding = 4,       // token embedding
    Attention = 5,       // one layer's norms and attention projections
    Router = 6,          // one layer's router (and shared-expert gate)
    Expert = 7,          // one expert's gate, up and down projections
    SharedExpert = 8,    // qwen2_moe shared expert
    DenseMlp = 9,        // a dense (non-MoE) layer's MLP
    Output = 10,         // final norm and lm head
    GenerationConfig = 11,  // 2.4: generation_config.json, verbatim (optional; older readers ignore the kind)
};

// Bits of HyperParams::flags.
enum HyperFlag : uint32_t {
    kNormTopkProb = 1u << 0,
    kQkvBias = 1u << 1,
    kQkNorm = 1u << 2,
    kTiedEmbeddings = 1u << 3,
    kSharedExpert = 1u << 4,
    // Format 2.1:
    kOutputBias = 1u << 5,          // attn.o_bias
    kAttentionSinks = 1u << 6,      // attn.sinks: a learned logit per head in every softmax (gpt_oss)
    kRouterBias = 1u << 7,          // router_bias added to the router logits (gpt_oss)
    kExpertBias = 1u << 8,          // experts' gate_bias, up_bias, down_bias (gpt_oss)
    kSelectionBias = 1u << 9,       // selection_bias: added to the scores for selection only (e_score_correction_bias)
    kQkNormPerHead = 1u << 10,      // with bit 2: the q/k norms are [head_dim], applied to each head
    kRopePairs = 1u << 11,          // RoPE rotates adjacent pairs (DeepSeek's rope_interleave), not halves
    kYarnTruncate = 1u << 12,       // YaRN's correction range rounded to whole dims (transformers' truncate)
    kSharedExpertUngated = 1u << 13,  // with bit 4: the shared expert has no gate, its output is added as it is
    // Format 2.2:
    kAttentionOutputGate = 1u << 14,  // attn.q_gate: the attention output times sigmoid(q_gate · x) per head (qwen3_next)
    kLinearValueTiled = 1u << 15,     // Gated DeltaNet value head j reads key head j % key_heads (llama.cpp's order for
                                      //   Qwen3.5), else j / (value_heads / key_heads) (Hugging Face's)
};

// Bits of LayerEntry::is_moe (format 2.1 gives it a second bit).
enum LayerFlag : uint32_t {
    kLayerMoe = 1u << 0,      // routed experts (else a dense MLP)
    kLayerSliding = 1u << 1,  // attention limited to the last HyperParams::sliding_window positions
};

// HyperParams::rope_scaling.
enum class RopeScaling : uint8_t { None = 0, Yarn = 1 };

struct HyperParams {
    // Format 2.2: Gated DeltaNet hybrids (qwen3_next, qwen3_5_moe). These 40 bytes were FileHeader's reserved
    // bytes (zero in older files: no linear-attention layers), so the fields below keep their offsets.
    uint32_t linear_key_heads;         // Gated DeltaNet key (and query) heads; 0 = no linear-attention layers
    uint32_t linear_value_heads;       // value heads (a multiple of the key heads: value head j reads key head j / ratio)
    uint32_t linear_key_dim;           // dims per key head
    uint32_t linear_value_dim;         // dims per value head
    uint32_t linear_conv_kernel;       // the causal conv1d's kernel
    uint32_t full_attention_interval;  // every interval-th layer (l + 1 = k·interval) is softmax attention, the others linear
    // Format 2.3 (zero in older files: no head): multi-token-prediction layers after the n_layers decoder layers. Each
    // is one more decoder layer, layers.{n_layers + k}, with the mtp.* tensors (docs/FORMAT.md, "The MTP head").
    uint32_t mtp_layers;
    uint8_t reserved_hparams[12];      // zero
    uint32_t vocab_size;
    uint32_t hidden_size;
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_experts;          // experts per MoE layer
    uint32_t n_experts_active;   // top-k
    uint32_t expert_ffn;         // intermediate size of one routed expert
    uint32_t shared_expert_ffn;  // 0 when there is no shared expert
    uint32_t dense_ffn;          // intermediate size of dense layers (0 when none)
    uint32_t max_position;
    float rms_eps;
    float rope_theta;
    float clip_qkv;              // 0 means no clipping
    uint32_t flags;              // HyperFlag bits
    int32_t bos_id;              // -1 when none
    int32_t eos_id;
    // Format 2.1 (zero in older files, which then mean what a zero says here).
    uint32_t rotary_dim;          // dims of each q/k head RoPE rotates (the first ones; MLA: the rope part); 0 = head_dim
    uint32_t sliding_window;      // positions a kLayerSliding layer attends to; 0 = none
    float routed_scaling;         // multiplies the routed experts' weights; 0 = 1
    uint8_t router_scoring;       // RouterScoring: 0 softmax over all experts, 1 sigmoid, 2 softmax of the selected logits
    uint8_t rope_scaling;         // RopeScaling
    uint8_t n_group;              // experts in n_group groups of consecutive ids, selection limited to the
    uint8_t topk_group;           //   topk_group best groups; 0 or 1: no groups
    uint32_t q_lora_rank;         // MLA: rank of the query's low-rank path; 0 = one q projection
    uint32_t kv_lora_rank;        // MLA (multi-head latent attention) when non-zero: rank of the kv latent
    uint32_t v_head_dim;          // MLA: value dims per head
    float swiglu_limit;           // gpt_oss's clamped SwiGLU with this limit; 0 = SwiGLU
    float rope_factor;            // YaRN: context extension factor
    uint32_t rope_original_max_position;  // YaRN: the context the model was trained with
    float yarn_beta_fast;         // YaRN: 0 = 32
    float yarn_beta_slow;         // YaRN: 0 = 1
    float yarn_mscale;            // YaRN: 0 = none
    float yarn_mscale_all_dim;    // YaRN: 0 = none
};
static_assert(sizeof(HyperParams) == 168);

struct FileHeader {
    char magic[8];
    uint16_t version_major;
    uint16_t version_minor;
    uint32_t family;              // Family
    uint64_t file_size;           // bytes, including trailing padding
    uint64_t metadata_size;       // bytes [0, metadata_size) hold header and tables
    uint64_t metadata_xxh64;      // xxh64 of [0, metadata_size) with this field zeroed
    uint64_t section_table_offset;
    uint32_t section_count;
    uint32_t tensor_count;
    uint64_t tensor_table_offset;
    uint64_t layer_table_offset;
    uint32_t layer_count;
    uint32_t expert_count;        // entries in the expert table (sum over MoE layers)
    uint64_t expert_table_offset;
    HyperParams hparams;  // its first 40 bytes were reserved before format 2.2
};
static_assert(sizeof(FileHeader) == 256);
static_assert(offsetof(FileHeader, hparams) + offsetof(HyperParams, vocab_size) == 128);  // 2.1's place

struct SectionEntry {
    uint32_t kind;     // SectionKind
    uint32_t layer;    // kNone when not per layer
    uint32_t expert;   // kNone when not an expert section
    uint32_t reserved;
    uint64_t offset;   // multiple of kSectionAlignment
    uint64_t size;     // bytes of content (padding to the next section is zero and not checksummed)
    uint64_t xxh64;    // of [offset, offset + size)
};
static_assert(sizeof(SectionEntry) == 40);

struct TensorEntry {
    char name[kTensorNameBytes];  // NUL-padded, e.g. "layers.3.experts.5.down"
    uint32_t section;             // index into the section table
    uint32_t weight_type;         // WeightType
    uint32_t n_dims;              // 1 or 2
    uint32_t reserved;
    uint64_t dims[2];             // dims[0] = rows (outputs), dims[1] = columns (inputs); 1-d: dims[0]
    uint64_t offset;              // absolute file offset, multiple of kTensorAlignment, inside its section
    uint64_t size;                // bytes
};
static_assert(sizeof(TensorEntry) == 112);

struct LayerEntry {
    uint32_t is_moe;          // LayerFlag bits: kLayerMoe (routed experts, else a dense MLP), kLayerSliding (2.1)
    uint32_t n_experts;       // experts of this layer (0 for dense)
    uint32_t first_expert;    // index of its first entry in the expert table
    uint32_t attention_section;
    uint32_t router_section;  // kNone for dense layers
    uint32_t mlp_section;     // shared expert or dense MLP section, kNone when absent
    uint64_t router_offset;   // absolute offset of the router weight, 0 for dense layers
};
static_assert(sizeof(LayerEntry) == 32);

struct ExpertEntry {
    uint32_t layer;
    uint32_t expert;
    uint32_t section;
    uint32_t weight_type;   // of its projections
    uint64_t offset;        // = its section's offset
    uint64_t size;          // bytes of its three projections
};
static_assert(sizeof(ExpertEntry) == 32);

// .bin.zst: the same image as a .bin, stored as one zstd frame per section (metadata included) so a loader
// decompresses only what it uses. The container starts with ZstdHeader, then `frame_count` FrameEntry records
// (frame i holds section i), then the frames back to back. Image offsets are those of the uncompressed .bin;
// the padding between sections is not stored (it is zero).
inline constexpr char kZstdMagic[8] = {'C', 'O', 'L', 'I', 'B', 'R', 'I', 'Z'};
inline constexpr uint16_t kZstdVersionMajor = 1;

struct ZstdHeader {
    char magic[8];
    uint16_t version_major;
    uint16_t version_minor;
    uint32_t frame_count;
    uint64_t image_size;          // bytes of the uncompressed .bin
    uint64_t frame_table_offset;  // = sizeof(ZstdHeader)
    uint64_t frame_table_xxh64;   // of the frame table
    uint64_t header_xxh64;        // of this header with this field zeroed
    uint8_t reserved[16];
};
static_assert(sizeof(ZstdHeader) == 64);

struct FrameEntry {
    uint64_t stored_offset;  // of the zstd frame in the .bin.zst
    uint64_t stored_size;
    uint64_t image_offset;   // = the section's offset in the image
    uint64_t image_size;     // = the section's size
};
static_assert(sizeof(FrameEntry) == 32);

const char* weight_type_name(WeightType t);
bool weight_type_from_name(std::string_view name, WeightType* out);
const char* section_kind_name(SectionKind k);
bool weight_type_is_known(uint32_t t);
// Bytes to store rows × cols of the type (cols must be a multiple of the block size for block types);
// returns false when the shape is not valid for the type or the size would overflow.
bool tensor_bytes(WeightType t, uint64_t rows, uint64_t cols, uint64_t* out);
// The header's numbers that no tensor shape vouches for, checked alike by the writer (a converter must not
// write what the loader refuses), the loader and the validator: rms_eps and rope_theta finite and positive, the
// other floats (clip_qkv, routed_scaling, swiglu_limit, the YaRN ones) finite and, but for the mscales, not
// negative. Empty when fine, else the first problem.
std::string numeric_hparams_problem(const HyperParams& hp);

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The tokenizer, its config, the chat template and the generation config are read whole into memory by the loader, the checker and the
// converters alike; each is at most this large (real ones are a few megabytes: Qwen3's tokenizer.json is 11 MB). One
// bound for all four, so that no file converts and loads that `colibri check` calls invalid.
inline constexpr uint64_t kMaxTextSectionBytes = uint64_t(256) << 20;
inline bool is_text_section(uint32_t kind) {
    return kind == static_cast<uint32_t>(SectionKind::TokenizerJson) || kind == static_cast<uint32_t>(SectionKind::TokenizerConfig) ||
           kind == static_cast<uint32_t>(SectionKind::ChatTemplate) || kind == static_cast<uint32_t>(SectionKind::GenerationConfig);
}

// Decompression bounds of a .bin.zst (a small hostile file must not inflate to gigabytes). The metadata frame is
// decompressed whole; real metadata is kilobytes to a few megabytes.
inline constexpr uint64_t kMaxMetadataBytes = uint64_t(256) << 20;
// Weights barely compress (x1 to x2), so an image more than 64 times its file (beyond 64 MiB) is refused.
inline constexpr uint64_t kMaxImageRatio = 64;
inline constexpr uint64_t kImageRatioSlack = uint64_t(64) << 20;
inline bool plausible_image_size(uint64_t image_size, uint64_t file_size) {
    return image_size <= kImageRatioSlack || image_size / kMaxImageRatio <= file_size;
}

}  // namespace colibri::format
