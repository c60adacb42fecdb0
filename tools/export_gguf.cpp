#include "tools/export_gguf.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "engine/file/model_file.h"
#include "engine/file/schema.h"
#include "engine/file/temp_output.h"
#include "kernels/weight_types.h"
#include "tools/ggml_dequant.h"
#include "tools/gguf_format.h"
#include "tools/gguf_names.h"

namespace colibri::tools {
namespace {

using format::Family;
using format::HyperParams;

using namespace gguf;  // the value types, magic, version and alignment (tools/gguf_format.h)

uint64_t aligned(uint64_t v) { return align_up(v, kDefaultAlignment); }  // no general.alignment key is written

// The header, metadata and tensor infos, built in memory.
class Header {
public:
    void u32(uint32_t v) { put(&v, 4); }
    void u64(uint64_t v) { put(&v, 8); }
    void str(const std::string& s) {
        u64(s.size());
        put(s.data(), s.size());
    }
    void kv_u32(const std::string& key, uint32_t v) { key_type(key, kU32), u32(v); }
    void kv_f32(const std::string& key, float v) { key_type(key, kF32), put(&v, 4); }
    void kv_bool(const std::string& key, bool v) {
        key_type(key, kBool);
        const uint8_t b = v;
        put(&b, 1);
    }
    void kv_str(const std::string& key, const std::string& v) { key_type(key, kString), str(v); }
    void kv_str_array(const std::string& key, const std::vector<std::string>& v) {
        key_type(key, kArray);
        u32(kString);
        u64(v.size());
        for (const std::string& s : v) str(s);
    }
    void kv_u32_array(const std::string& key, const std::vector<uint32_t>& v) {
        key_type(key, kArray);
        u32(kU32);
        u64(v.size());
        for (uint32_t x : v) u32(x);
    }
    size_t kv_count() const { return kvs_; }
    const std::vector<uint8_t>& bytes() const { return bytes_; }

private:
    void key_type(const std::string& key, uint32_t type) {
        str(key);
        u32(type);
        ++kvs_;
    }
    void put(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes_.insert(bytes_.end(), b, b + n);
    }
    std::vector<uint8_t> bytes_;
    size_t kvs_ = 0;
};

struct OutTensor {
    std::string name;
    std::vector<uint64_t> ne;              // ggml order: ne[0] the contiguous dimension
    WeightType type;
    std::vector<const TensorView*> parts;  // the tensor, or each expert's slice of a stack in order
    uint32_t permute_heads = 0;
    uint32_t row_block = 0;                // > 0: parts' rows alternate in blocks of this many (GgufPlace::row_block)
    uint64_t offset = 0, size = 0;
};

// Qwen3-Next's and Qwen3.5's Gated DeltaNet sizes under llama.cpp's ssm keys; Qwen3.5's (interleaved MRoPE) rotary
// sections, which only split the rotary pairs among positions that are all the token's index for text.
void write_linear_attention(Header& h, Family family, const HyperParams& hp, const std::string& a, uint32_t rotary) {
    h.kv_u32(a + ".ssm.conv_kernel", hp.linear_conv_kernel);
    h.kv_u32(a + ".ssm.state_size", hp.linear_key_dim);
    h.kv_u32(a + ".ssm.group_count", hp.linear_key_heads);
    h.kv_u32(a + ".ssm.time_step_rank", hp.linear_value_heads);
    h.kv_u32(a + ".ssm.inner_size", hp.linear_value_heads * hp.linear_value_dim);
    h.kv_u32(a + ".full_attention_interval", hp.full_attention_interval);
    if (family != Family::Qwen35Moe) return;
    const uint32_t half = rotary / 2, s0 = (half + 2) / 3, s1 = (half + 1) / 3;  // [11, 11, 10] for 32 pairs
    h.kv_u32_array(a + ".rope.dimension_sections", {s0, s1, half - s0 - s1, 0});
}

// The hyper-parameters under llama.cpp's keys for the family (what its converter writes for the same config).
void write_hparams(Header& h, Family family, const HyperParams& hp, const std::vector<bool>& moe_layer, const char* arch,
                   bool placeholder_vocab) {
    const std::string a = arch;
    const bool old_family = family == Family::Mixtral || family == Family::Qwen2Moe || family == Family::Olmoe;
    const bool deepseek = family == Family::DeepseekV3 || family == Family::Glm4MoeLite, sigmoid = deepseek || family == Family::Glm4Moe;
    const bool minimax = family == Family::MinimaxM2;
    h.kv_str("general.architecture", a);
    h.kv_str("general.name", "colibri export");
    h.kv_u32("general.quantization_version", 2);
    // llama.cpp counts the multi-token-prediction layers (the last blocks) in block_count and says how many they are.
    h.kv_u32(a + ".block_count", hp.n_layers + hp.mtp_layers);
    if (hp.mtp_layers) h.kv_u32(a + ".nextn_predict_layers", hp.mtp_layers);
    h.kv_u32(a + ".context_length", hp.max_position);
    h.kv_u32(a + ".embedding_length", hp.hidden_size);
    h.kv_u32(a + ".feed_forward_length", hp.dense_ffn ? hp.dense_ffn : hp.expert_ffn);
    h.kv_u32(a + ".attention.head_count", hp.n_heads);
    h.kv_u32(a + ".attention.head_count_kv", deepseek ? 1 : hp.n_kv_heads);  // MLA: one shared latent
    h.kv_f32(a + ".rope.freq_base", hp.rope_theta);
    h.kv_f32(a + ".attention.layer_norm_rms_epsilon", hp.rms_eps);
    h.kv_u32(a + ".expert_count", hp.n_experts);
    h.kv_u32(a + ".expert_used_count", hp.n_experts_active);
    const uint32_t rotary = hp.rotary_dim ? hp.rotary_dim : hp.head_dim;
    if (deepseek) {
        // key_length/value_length are the latent's as llama.cpp's MLA path reads them; *_mla the per-head sizes.
        h.kv_u32(a + ".attention.key_length", hp.kv_lora_rank + rotary);
        h.kv_u32(a + ".attention.value_length", hp.kv_lora_rank);
        h.kv_u32(a + ".attention.key_length_mla", hp.head_dim);
        h.kv_u32(a + ".attention.value_length_mla", hp.v_head_dim);
        if (hp.q_lora_rank) h.kv_u32(a + ".attention.q_lora_rank", hp.q_lora_rank);
        h.kv_u32(a + ".attention.kv_lora_rank", hp.kv_lora_rank);
    } else if (!old_family || hp.head_dim * hp.n_heads != hp.hidden_size) {
        h.kv_u32(a + ".attention.key_length", hp.head_dim);
        h.kv_u32(a + ".attention.value_length", hp.head_dim);
    }
    h.kv_u32(a + ".vocab_size", hp.vocab_size);
    const bool hybrid = family == Family::Qwen3Next || family == Family::Qwen35Moe;
    if (family == Family::Mixtral || deepseek || family == Family::Glm4Moe || minimax || hybrid) h.kv_u32(a + ".rope.dimension_count", rotary);
    if (minimax) h.kv_u32(a + ".expert_gating_func", 2);  // sigmoid, as llama.cpp's converter writes from scoring_func
    if (hybrid) write_linear_attention(h, family, hp, a, rotary);
    if (family != Family::Mixtral && family != Family::Olmoe) h.kv_u32(a + ".expert_feed_forward_length", hp.expert_ffn);
    if ((family == Family::Qwen2Moe || hybrid) && hp.shared_expert_ffn) h.kv_u32(a + ".expert_shared_feed_forward_length", hp.shared_expert_ffn);
    if (family == Family::Olmoe && hp.clip_qkv > 0) h.kv_f32(a + ".attention.clamp_kqv", hp.clip_qkv);
    if (family == Family::GptOss && hp.sliding_window) h.kv_u32(a + ".attention.sliding_window", hp.sliding_window);
    if (sigmoid) {
        uint32_t leading_dense = 0;
        while (leading_dense < moe_layer.size() && !moe_layer[leading_dense]) ++leading_dense;
        h.kv_u32(a + ".leading_dense_block_count", leading_dense);
        h.kv_u32(a + ".expert_shared_count", hp.expert_ffn ? hp.shared_expert_ffn / hp.expert_ffn : 0);
        h.kv_u32(a + ".expert_group_count", hp.n_group ? hp.n_group : 1);
        h.kv_u32(a + ".expert_group_used_count", hp.topk_group ? hp.topk_group : 1);
        h.kv_f32(a + ".expert_weights_scale", hp.routed_scaling > 0 ? hp.routed_scaling : 1.0f);
        h.kv_u32(a + ".expert_gating_func", 2);  // sigmoid (gguf.ExpertGatingFuncType)
    }
    // llama.cpp renormalises qwen3moe's top-k weights whatever the key says, and its converter writes none.
    const bool norm_key = family != Family::Mixtral && family != Family::Qwen3Moe && family != Family::GptOss && !minimax;
    if (norm_key && (sigmoid || (hp.flags & format::kNormTopkProb))) h.kv_bool(a + ".expert_weights_norm", hp.flags & format::kNormTopkProb);
    if (hp.rope_scaling == uint8_t(format::RopeScaling::Yarn)) {
        h.kv_str(a + ".rope.scaling.type", "yarn");
        h.kv_f32(a + ".rope.scaling.factor", hp.rope_factor);
        h.kv_u32(a + ".rope.scaling.original_context_length", hp.rope_original_max_position);
        h.kv_f32(a + ".rope.scaling.yarn_beta_fast", hp.yarn_beta_fast > 0 ? hp.yarn_beta_fast : 32.0f);
        h.kv_f32(a + ".rope.scaling.yarn_beta_slow", hp.yarn_beta_slow > 0 ? hp.yarn_beta_slow : 1.0f);
        if (deepseek && hp.yarn_mscale_all_dim > 0) h.kv_f32(a + ".rope.scaling.yarn_log_multiplier", 0.1f * hp.yarn_mscale_all_dim);
    }
    if (!placeholder_vocab) {
        // No vocabulary: llama.cpp makes vocab_size placeholder tokens.
        h.kv_str("tokenizer.ggml.model", "none");
        return;
    }
    // A stand-in BPE: piece "<ID>" for each id (printable ASCII, so byte-level decoding gives it back as it
    // is), one merge that never applies (llama.cpp's BPE loader wants the key), the model's bos/eos ids.
    std::vector<std::string> pieces(hp.vocab_size);
    for (uint32_t i = 0; i < hp.vocab_size; ++i) pieces[i] = "<" + std::to_string(i) + ">";
    h.kv_str("tokenizer.ggml.model", "gpt2");
    h.kv_str("tokenizer.ggml.pre", "default");
    h.kv_str_array("tokenizer.ggml.tokens", pieces);
    h.kv_str_array("tokenizer.ggml.merges", {"< >"});
    if (hp.bos_id >= 0) h.kv_u32("tokenizer.ggml.bos_token_id", uint32_t(hp.bos_id));
    if (hp.eos_id >= 0) h.kv_u32("tokenizer.ggml.eos_token_id", uint32_t(hp.eos_id));
}

}  // namespace

Status export_gguf(const std::string& bin_path, const std::string& out_path, bool placeholder_vocab) {
    auto file = ModelFile::open(bin_path);
    if (!file) return file.status();
    const ModelFile& m = *file.value();
    const HyperParams& hp = m.hparams();
    const Family family = static_cast<Family>(m.header().family);
    const char* arch = gguf_architecture(family);
    if (arch == nullptr) return error(bin_path + ": no GGUF architecture for this family");

    const std::vector<bool> moe_layer = format::moe_layers(m.tables());
    // llama.cpp runs sliding-window attention for gpt-oss only: another family's window would be dropped.
    for (const format::LayerEntry& l : m.layers())
        if (family != Family::GptOss && (l.is_moe & format::kLayerSliding))
            return error(bin_path + ": its layers attend to a sliding window, which llama.cpp's " + arch + " does not");
    // deepseek2 and glm4moe count dense layers from the front (leading_dense_block_count): GLM-4.7-Flash's mlp_layer_types
    // may put one after a MoE layer, which those files cannot say.
    const auto first_moe = std::find(moe_layer.begin(), moe_layer.end(), true);
    const bool leading_dense_only = family == Family::DeepseekV3 || family == Family::Glm4MoeLite || family == Family::Glm4Moe;
    if (leading_dense_only && std::find(first_moe, moe_layer.end(), false) != moe_layer.end())
        return error(bin_path + ": a dense layer follows a MoE layer, which llama.cpp's " + arch + " cannot say (leading_dense_block_count)");
    // The tensors the loader checks against (engine/file/file_rules.h): hyper-parameters it refuses are refused here too.
    format::FirstProblem refused;
    const std::vector<schema::TensorSpec> specs = format::expected_tensors(m.tables(), refused.sink());
    if (!refused.text.empty()) return error(bin_path + ": " + refused.text);
    std::vector<OutTensor> out;
    std::map<std::string, size_t> by_name;
    for (const schema::TensorSpec& spec : specs) {
        const TensorView* t = m.find_tensor(spec.name);
        if (t == nullptr) return error(bin_path + ": tensor " + spec.name + " is missing");
        const std::optional<GgufPlace> place = gguf_place(family, hp, spec);
        if (!place) return error(bin_path + ": tensor " + spec.name + " has no place in a " + arch + " GGUF file");
        auto [it, fresh] = by_name.emplace(place->name, out.size());
        if (fresh) {
            OutTensor o;
            o.name = place->name;
            o.type = t->type;
            o.permute_heads = place->permute_heads;
            if (t->n_dims == 1 || place->as_row) o.ne = {t->n_dims == 1 ? t->rows : t->cols};
            else if (place->flattened) o.ne = {t->cols, t->rows / hp.n_heads, hp.n_heads};  // per head, as llama.cpp keeps it
            else o.ne = {t->cols, t->rows * place->parts};
            if (place->expert >= 0) o.ne.push_back(hp.n_experts);
            o.row_block = place->row_block;
            o.parts.assign(place->expert >= 0 ? hp.n_experts : place->parts, nullptr);
            out.push_back(std::move(o));
        }
        OutTensor& o = out[it->second];
        const size_t part = place->expert >= 0 ? size_t(place->expert) : place->part;
        if (part >= o.parts.size() || o.parts[part] != nullptr) return error(bin_path + ": tensor " + spec.name + " maps twice onto " + o.name);
        if (t->type != o.type)
            return error(bin_path + ": the experts stacked in " + o.name + " differ in type (" + format::weight_type_name(t->type) +
                         " and " + format::weight_type_name(o.type) + "); a GGUF stack has one type");
        o.parts[part] = t;
    }

    Header h;
    h.u32(kMagicWord);
    h.u32(kVersion);
    h.u64(out.size());
    const size_t kv_count_at = h.bytes().size();
    h.u64(0);  // kv count, patched below
    write_hparams(h, family, hp, moe_layer, arch, placeholder_vocab);
    const size_t kvs = h.kv_count();
    uint64_t data = 0;
    for (OutTensor& o : out) {
        for (const TensorView* p : o.parts)
            if (p == nullptr) return error(bin_path + ": " + o.name + " misses an expert");
        uint64_t n = 1;
        for (uint64_t d : o.ne) n *= d;
        o.size = n / weight_type_info(o.type).block_values * weight_type_info(o.type).block_bytes;
        o.offset = data;
        data = aligned(data + o.size);
        h.str(o.name);
        h.u32(uint32_t(o.ne.size()));
        for (uint64_t d : o.ne) h.u64(d);
        h.u32(ggml_type_of(o.type));
        h.u64(o.offset);
    }
    std::vector<uint8_t> header = h.bytes();
    std::memcpy(header.data() + kv_count_at, &kvs, 8);
    const uint64_t data_start = aligned(header.size());

    TempOutput f;
    COLIBRI_TRY(f.create(out_path));
    COLIBRI_TRY(f.resize(data_start + data));
    COLIBRI_TRY(f.write_at(0, header.data(), header.size()));
    std::vector<uint8_t> buffer;
    for (const OutTensor& o : out) {
        uint64_t at = data_start + o.offset;
        if (o.row_block) {  // the parts' blocks of rows in turn: GGUF row R is row (R / (block·parts))·block + R % block of part R / block % parts
            const TensorView* p0 = o.parts[0];
            const uint64_t cols = p0->cols, rows = p0->rows * o.parts.size(), row_bytes = weight_row_bytes(p0->type, cols);
            buffer.resize(rows * row_bytes);
            for (uint64_t r = 0; r < rows; ++r) {
                const uint64_t block = r / o.row_block, from = block / o.parts.size() * o.row_block + r % o.row_block;
                const TensorView* p = o.parts[block % o.parts.size()];
                if (p->rows != p0->rows || p->type != p0->type) return error(bin_path + ": the parts of " + o.name + " differ in shape or type");
                ggml_export_row(p->type, static_cast<const uint8_t*>(p->data) + from * row_bytes, buffer.data() + r * row_bytes, cols);
            }
            COLIBRI_TRY(f.write_at(at, buffer.data(), buffer.size()));
            continue;
        }
        for (const TensorView* p : o.parts) {
            const uint64_t cols = p->n_dims == 1 ? p->rows : p->cols, rows = p->n_dims == 1 ? 1 : p->rows;
            const uint64_t row_bytes = weight_row_bytes(p->type, cols);
            buffer.resize(rows * row_bytes);
            const auto* src = static_cast<const uint8_t*>(p->data);
            const uint64_t hd = o.permute_heads ? rows / o.permute_heads : 0, half = hd / 2;
            for (uint64_t r = 0; r < rows; ++r) {
                // llama.cpp's rotary permutation: its row h·hd + 2i + t is the model's row h·hd + t·hd/2 + i.
                const uint64_t from = o.permute_heads ? (r / hd) * hd + (r % hd % 2) * half + (r % hd) / 2 : r;
                ggml_export_row(p->type, src + from * row_bytes, buffer.data() + r * row_bytes, cols);
            }
            COLIBRI_TRY(f.write_at(at, buffer.data(), buffer.size()));
            at += buffer.size();
        }
    }
    return f.commit();
}

}  // namespace colibri::tools
