// GGUF import. llama.cpp's hyper-parameter keys are read (each checked, errors name the key) into the HF-style
// config that plan_model() plans from; GGUF tensors are mapped onto the HF names of that plan (undoing the
// rotary row permutation llama.cpp applies to llama q/k, slicing stacked expert tensors); the tokenizer.ggml.*
// keys become the HF tokenizer files; then the writer loop shared with the HF importer streams the .bin.
//
// No double quantisation: a matrix stored in a ggml block type the engine computes on (Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K, MXFP4) keeps its blocks, moved but never re-encoded (Q4_K's nibbles go to the engine's interleaved
// order), so every weight keeps its value; f32/f16/bf16 matrices are stored as the requested type; tensors the
// engine keeps in f32 (norms, biases, routers) are dequantised, which is exact.
//
// Architectures: llama with experts (Mixtral), qwen2moe (shared expert with a sigmoid gate, q/k/v biases),
// olmoe (q/k RMSNorms over the whole projection), qwen3moe, gpt-oss, deepseek2 (DeepSeek-V3's MLA with llama.cpp's
// per-head attn_k_b / attn_v_b) and glm4moe; tools/gguf_names.h has every tensor's place. llama.cpp permutes q/k
// rows only for llama.
#include <algorithm>
#include <map>
#include <optional>

#include "convert.h"
#include "convert_plan.h"
#include "engine/file/schema.h"
#include "engine/text/tokenizer.h"
#include "ggml_dequant.h"
#include "gguf.h"
#include "gguf_names.h"
#include "gguf_tokenizer.h"

namespace colibri::tools {

using nlohmann::json;
using format::Family;

namespace {

std::string join(const std::vector<uint64_t>& dims) {
    std::string s;
    for (uint64_t d : dims) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return s;
}

// The rows of q or k as transformers orders them: llama.cpp stores each head's rotary halves interleaved.
std::vector<uint32_t> unpermute_rows(uint64_t rows, uint32_t heads) {
    std::vector<uint32_t> order(rows);
    const uint64_t hd = rows / heads, half = hd / 2;
    for (uint64_t h = 0; h < heads; ++h)
        for (uint64_t t = 0; t < 2; ++t)
            for (uint64_t i = 0; i < half; ++i) order[h * hd + t * half + i] = static_cast<uint32_t>(h * hd + i * 2 + t);
    return order;
}

// GGUF tensors under the HF names the plan asks for. f32/f16/bf16 data is read in place from the mapping;
// quantised data is dequantised into one reused f32 buffer by load(), just before the writer encodes it.
class GgufSource {
public:
    explicit GgufSource(const GgufFile& f) : file_(f) {}
    Status status() const { return status_; }

    const SourceTensor* find(const std::string& hf) const {
        auto it = map_.find(hf);
        return it == map_.end() ? nullptr : &it->second.tensor;
    }
    // The GGUF tensor an HF name was mapped from (also for tensors missing from the file), or "".
    std::string gguf_name(const std::string& hf) const {
        auto it = wanted_.find(hf);
        return it == wanted_.end() ? std::string() : it->second;
    }
    bool has(const std::string& gguf) const { return file_.tensors().count(gguf) != 0; }
    // Keeps the first problem; status() reports it.
    void fail(const Status& s) {
        if (status_) status_ = s;
    }

    // A whole 1-d or 2-d tensor. as_row: a 1-d tensor is taken as a [1, n] matrix (a gate vector); flattened: a
    // 3-d tensor is taken as the matrix of its rows ([ne2·ne1, ne0]).
    void map(const std::string& hf, const std::string& gguf, uint32_t unpermute_heads = 0, bool as_row = false, bool flattened = false) {
        wanted_[hf] = gguf;
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;  // a missing tensor is reported by check_shapes
        const GgufTensor& g = it->second;
        const size_t max_dims = flattened ? 3 : 2;
        if (g.ne.size() > max_dims)
            return fail(error("tensor " + gguf + " has " + std::to_string(g.ne.size()) + " dims, expected at most " + std::to_string(max_dims)));
        std::vector<uint64_t> shape = g.ne.size() == 1 ? std::vector<uint64_t>{g.ne[0]} : std::vector<uint64_t>{g.ne[1], g.ne[0]};
        if (g.ne.size() == 3) shape = {g.ne[2] * g.ne[1], g.ne[0]};
        if (as_row && shape.size() == 1) shape = {1, shape[0]};
        Entry e;
        if (!describe(g, shape, g.data, g.size, e)) return;
        if (unpermute_heads) {
            if (shape.size() != 2 || shape[0] % (2 * uint64_t(unpermute_heads)) != 0)
                return fail(error("tensor " + gguf + " rows do not split into " + std::to_string(unpermute_heads) + " heads"));
            e.tensor.row_order = unpermute_rows(shape[0], unpermute_heads);
        }
        map_.emplace(hf, std::move(e));
    }
    // Part `part` of a matrix whose rows alternate in blocks of row_block between `parts` tensors (GgufPlace::row_block).
    void map_part(const std::string& hf, const std::string& gguf, uint64_t row_block, uint64_t part, uint64_t parts) {
        wanted_[hf] = gguf;
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;
        const GgufTensor& g = it->second;
        if (g.ne.size() != 2 || row_block == 0 || g.ne[1] % (row_block * parts) != 0)
            return fail(error("tensor " + gguf + " has shape [" + join(g.ne) + "] (ggml order), not " + std::to_string(parts) +
                              " matrices in blocks of " + std::to_string(row_block) + " rows"));
        Entry e;
        if (!describe(g, {g.ne[1], g.ne[0]}, g.data, g.size, e)) return;
        e.source_rows = g.ne[1];
        e.tensor.shape = {g.ne[1] / parts, g.ne[0]};
        e.tensor.row_order.resize(g.ne[1] / parts);
        for (uint64_t r = 0; r < e.tensor.row_order.size(); ++r)
            e.tensor.row_order[r] = static_cast<uint32_t>((r / row_block * parts + part) * row_block + r % row_block);
        map_.emplace(hf, std::move(e));
    }
    // Expert e of a stacked [n_expert, rows, cols] tensor, or of a stack of vectors [n_expert, n] (gpt-oss's
    // expert biases). The stack must hold exactly the model's experts: llama.cpp refuses any other count.
    void map_expert(const std::string& hf, const std::string& gguf, uint64_t expert, uint64_t n_experts) {
        wanted_[hf] = gguf;
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;
        const GgufTensor& g = it->second;
        const size_t dims = g.ne.size();
        if ((dims != 2 && dims != 3) || expert >= g.ne[dims - 1])
            return fail(error("tensor " + gguf + " has shape [" + join(g.ne) + "] (ggml order), not a stack of experts"));
        if (g.ne[dims - 1] != n_experts)
            return fail(error("tensor " + gguf + " stacks " + std::to_string(g.ne[dims - 1]) + " experts, the model has " +
                              std::to_string(n_experts) + " (expert_count)"));
        const uint64_t bytes = g.size / g.ne[dims - 1];
        Entry e;
        const std::vector<uint64_t> shape = dims == 3 ? std::vector<uint64_t>{g.ne[1], g.ne[0]} : std::vector<uint64_t>{g.ne[0]};
        if (!describe(g, shape, g.data + expert * bytes, bytes, e)) return;
        map_.emplace(hf, std::move(e));
    }

    // The engine's type that would hold this tensor's blocks unchanged, if it is quantised in one.
    std::optional<WeightType> carried_type(const std::string& hf) const {
        auto it = map_.find(hf);
        if (it == map_.end() || !it->second.quantized) return std::nullopt;
        return ggml_carried_type(it->second.ggml_type);
    }
    // From now on the tensor is presented as its blocks (carried_type), not as f32 values.
    void carry(const std::string& hf) {
        Entry& e = map_.at(hf);
        e.carry = true;
        e.tensor.blocks = ggml_carried_type(e.ggml_type);
        e.tensor.size = e.source_rows ? e.quantized_size / e.source_rows * e.tensor.shape[0] : e.quantized_size;
    }

    // Makes the data of a quantised tensor available: its blocks in the engine's layout and row order when
    // carried, else its values dequantised to f32; others need nothing.
    Status load(const std::string& hf) {
        auto it = map_.find(hf);
        if (it == map_.end() || !it->second.quantized) return Status::ok();
        Entry& e = it->second;
        const std::vector<uint64_t>& shape = e.tensor.shape;
        const uint64_t n = e.tensor.elements(), cols = shape.back(), rows = n / cols;
        const uint64_t source_rows = e.source_rows ? e.source_rows : rows;  // a part reads the whole tensor's rows
        if (e.carry) {
            const uint64_t row_bytes = e.quantized_size / source_rows;
            blocks_.resize(rows * row_bytes);
            for (uint64_t r = 0; r < rows; ++r) {
                const uint64_t from = e.tensor.row_order.empty() ? r : e.tensor.row_order[r];
                ggml_carry_row(e.ggml_type, e.quantized + from * row_bytes, blocks_.data() + r * row_bytes, cols);
            }
            e.tensor.data = blocks_.data();
        } else {
            buffer_.resize(source_rows * cols);
            ggml_dequantize_row(e.ggml_type, e.quantized, buffer_.data(), source_rows * cols);
            e.tensor.data = reinterpret_cast<const uint8_t*>(buffer_.data());
        }
        // The mapped pages are done with; the buffer is what the writer reads now.
        SourceTensor mapped;
        mapped.data = e.quantized;
        mapped.size = e.quantized_size;
        release_source_pages(mapped);
        return Status::ok();
    }

private:
    struct Entry {
        SourceTensor tensor;
        uint32_t ggml_type = 0;
        const uint8_t* quantized = nullptr;  // non-null: tensor.data is filled by load()
        uint64_t quantized_size = 0;
        bool carry = false;  // load() re-lays out the blocks instead of dequantising them
        uint64_t source_rows = 0;  // map_part: rows of the whole GGUF tensor (0: the tensor's own)
    };

    bool describe(const GgufTensor& g, std::vector<uint64_t> shape, const uint8_t* data, uint64_t size, Entry& e) {
        e.tensor = SourceTensor{};
        e.tensor.dtype = SourceDType::F32;
        e.tensor.shape = std::move(shape);
        e.tensor.data = data;
        e.tensor.size = size;
        e.ggml_type = g.type;
        switch (static_cast<GgmlType>(g.type)) {
            case GgmlType::F32: return true;
            case GgmlType::F16: e.tensor.dtype = SourceDType::F16; return true;
            case GgmlType::BF16: e.tensor.dtype = SourceDType::BF16; return true;
            default: break;
        }
        if (!ggml_is_dequantizable(g.type)) {
            fail(error("tensor " + g.name + " has ggml type " + ggml_type_name(g.type) +
                       ", which cannot be imported (f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, mxfp4)"));
            return false;
        }
        e.quantized = data;
        e.quantized_size = size;
        e.tensor.data = nullptr;
        e.tensor.size = e.tensor.elements() * 4;
        return true;
    }

    const GgufFile& file_;
    std::map<std::string, Entry> map_;
    std::map<std::string, std::string> wanted_;
    std::vector<float> buffer_;
    std::vector<uint8_t> blocks_;
    Status status_;
};

// Typed reads of "<arch>.<key>" metadata; the first problem is kept, naming the key.
class Meta {
public:
    Meta(const json& m, std::string arch) : m_(m), arch_(std::move(arch)) {}
    Status status() const { return status_; }
    bool has(const std::string& key) const { return find(key) != nullptr; }

    // A positive integer; without a fallback the key is required.
    uint64_t count(const std::string& key, std::optional<uint64_t> fallback = std::nullopt) {
        const json* v = find(key);
        if (v == nullptr) return missing(key, fallback);
        if (!v->is_number_unsigned() || v->get<uint64_t>() == 0 || v->get<uint64_t>() > (uint64_t(1) << 31)) {
            fail(name(key) + " must be a positive integer");
            return 0;
        }
        return v->get<uint64_t>();
    }
    // A count that may be 0; 0 when absent.
    uint64_t count_or_zero(const std::string& key) {
        const json* v = find(key);
        if (v == nullptr) return 0;
        if (!v->is_number_unsigned() || v->get<uint64_t>() > (uint64_t(1) << 31)) {
            fail(name(key) + " must be a non-negative integer");
            return 0;
        }
        return v->get<uint64_t>();
    }
    double real(const std::string& key, std::optional<double> fallback = std::nullopt) {
        const json* v = find(key);
        if (v == nullptr) return missing(key, fallback);
        if (!v->is_number() || !(v->get<double>() > 0)) {
            fail(name(key) + " must be a positive number");
            return 0;
        }
        return v->get<double>();
    }
    bool flag(const std::string& key, bool fallback) {
        const json* v = find(key);
        if (v == nullptr) return fallback;
        if (!v->is_boolean()) {
            fail(name(key) + " must be true or false");
            return fallback;
        }
        return v->get<bool>();
    }
    std::string text(const std::string& key) {
        const json* v = find(key);
        if (v == nullptr) return {};
        if (!v->is_string()) {
            fail(name(key) + " must be a string");
            return {};
        }
        return v->get<std::string>();
    }
    void fail(const std::string& why) {
        if (status_) status_ = error("GGUF metadata: " + why);
    }
    std::string name(const std::string& key) const { return arch_ + "." + key; }

private:
    const json* find(const std::string& key) const {
        auto it = m_.find(arch_ + "." + key);
        return it == m_.end() || it->is_null() ? nullptr : &*it;
    }
    template <typename T>
    T missing(const std::string& key, std::optional<T> fallback) {
        if (fallback) return *fallback;
        fail("missing " + name(key));
        return T{};
    }
    const json& m_;
    std::string arch_;
    Status status_;
};

struct ArchInfo {
    Family family;
};

Result<ArchInfo> arch_info(const std::string& arch, const json& md) {
    if (arch == "llama") {
        auto it = md.find("llama.expert_count");
        if (it == md.end() || !it->is_number_unsigned() || it->get<uint64_t>() == 0)
            return error("GGUF architecture 'llama' without experts is a dense model; only MoE models are supported");
    }
    if (const std::optional<Family> f = family_from_gguf_architecture(arch)) return ArchInfo{*f};
    return error("GGUF architecture '" + arch + "' is not supported (llama with experts, qwen2moe, olmoe, qwen3moe, gpt-oss, deepseek2, glm4moe, minimax-m2, qwen3next, qwen35moe)");
}

std::string layer_prefix(uint32_t l) { return "blk." + std::to_string(l) + "."; }

// The HF config.json that the GGUF metadata stands for, in the fields plan_model() reads. Where llama.cpp keeps no
// key for a fact, its own rule for the architecture is followed (said at each place).
Result<json> config_from_metadata(const GgufFile& file, const std::string& arch, const ArchInfo& info) {
    const json& md = file.metadata();
    const Family fam = info.family;
    const bool deepseek = fam == Family::DeepseekV3, glm4 = fam == Family::Glm4Moe, gpt_oss = fam == Family::GptOss;
    const bool minimax = fam == Family::MinimaxM2;
    const bool hybrid = fam == Family::Qwen3Next || fam == Family::Qwen35Moe;
    const auto has_tensor = [&](const std::string& name) { return file.tensors().count(name) != 0; };
    Meta meta(md, arch);
    json cfg;
    cfg["model_type"] = fam == Family::Qwen35Moe ? "qwen3_5_moe_text" : format::family_name(fam);
    const uint64_t hidden = meta.count("embedding_length"), heads = meta.count("attention.head_count");
    uint64_t layers = meta.count("block_count");
    // GLM-4.5's, GLM-4.7-Flash's (deepseek2), Qwen3-Next's and Qwen3.5's files count the multi-token-prediction layers
    // (the last ones) in block_count: they become the .bin's MTP layers (plan_model bounds their count), or, in a file
    // written without their tensors (llama.cpp's --no-mtp), are left out.
    if ((glm4 || deepseek || hybrid) && meta.has("nextn_predict_layers")) {
        const uint64_t nextn = meta.count_or_zero("nextn_predict_layers");
        if (meta.status() && nextn >= layers) meta.fail(meta.name("nextn_predict_layers") + " is not below the block count");
        layers -= std::min(nextn, layers);
        if (nextn && has_tensor(layer_prefix(static_cast<uint32_t>(layers)) + "nextn.eh_proj.weight")) cfg["num_nextn_predict_layers"] = nextn;
    }
    cfg["hidden_size"] = hidden;
    cfg["num_hidden_layers"] = layers;
    cfg["num_attention_heads"] = heads;
    // MLA's GGUF says one KV head (the shared latent); the HF config counts the query heads.
    cfg["num_key_value_heads"] = deepseek ? heads : meta.count("attention.head_count_kv", heads);
    const char* experts_key = deepseek || glm4 ? "n_routed_experts" : fam == Family::Mixtral || gpt_oss || minimax ? "num_local_experts" : "num_experts";
    cfg[experts_key] = meta.count("expert_count");
    cfg["num_experts_per_tok"] = meta.count("expert_used_count");
    cfg["rms_norm_eps"] = meta.real("attention.layer_norm_rms_epsilon");
    json rope = {{"rope_theta", meta.real("rope.freq_base", 10000.0)}, {"rope_type", "default"}};
    if (meta.has("context_length")) cfg["max_position_embeddings"] = meta.count("context_length");
    if (deepseek) {
        // Newer files give the MLA sizes under *_mla (key_length is then the latent's); older ones only key_length.
        const bool mla_keys = meta.has("attention.key_length_mla");
        const uint64_t key = meta.count(mla_keys ? "attention.key_length_mla" : "attention.key_length");
        const uint64_t value = meta.count(mla_keys ? "attention.value_length_mla" : "attention.value_length");
        const uint64_t rot = meta.count("rope.dimension_count");
        if (meta.status() && rot >= key) meta.fail(meta.name("rope.dimension_count") + " is not below the key length");
        cfg["qk_rope_head_dim"] = rot;
        cfg["qk_nope_head_dim"] = key - std::min(rot, key);
        cfg["v_head_dim"] = value;
        cfg["head_dim"] = rot;
        cfg["kv_lora_rank"] = meta.count("attention.kv_lora_rank");
        if (meta.has("attention.q_lora_rank") && meta.count_or_zero("attention.q_lora_rank") > 0)
            cfg["q_lora_rank"] = meta.count("attention.q_lora_rank");
        cfg["rope_interleave"] = true;  // llama.cpp rotates adjacent pairs for deepseek2, as rope_interleave does
    } else if (meta.has("attention.key_length") || meta.has("attention.value_length")) {
        const uint64_t k = meta.count("attention.key_length"), v = meta.count("attention.value_length");
        if (meta.status() && k != v) meta.fail(meta.name("attention.key_length") + " differs from " + meta.name("attention.value_length"));
        cfg["head_dim"] = k;
    }
    const std::string b0 = layer_prefix(0);
    if (fam == Family::Qwen2Moe || fam == Family::Qwen3Moe) {
        cfg["moe_intermediate_size"] = meta.count("expert_feed_forward_length");
        if (fam == Family::Qwen2Moe && (meta.has("expert_shared_feed_forward_length") || has_tensor(b0 + "ffn_gate_shexp.weight")))
            cfg["shared_expert_intermediate_size"] = meta.count("expert_shared_feed_forward_length");
        // llama.cpp keeps no decoder_sparse_step / mlp_only_layers: a layer without a router is a dense one.
        json dense = json::array();
        for (uint32_t l = 0; l < layers && l < 4096; ++l)
            if (!has_tensor(layer_prefix(l) + "ffn_gate_inp.weight")) dense.push_back(l);
        cfg["mlp_only_layers"] = dense;
        if (!dense.empty()) cfg["intermediate_size"] = meta.count("feed_forward_length");
        if (fam == Family::Qwen3Moe) cfg["attention_bias"] = has_tensor(b0 + "attn_q.bias");
    } else if (hybrid) {
        cfg["moe_intermediate_size"] = meta.count("expert_feed_forward_length");
        if (has_tensor(b0 + "ffn_gate_shexp.weight")) cfg["shared_expert_intermediate_size"] = meta.count("expert_shared_feed_forward_length");
        cfg["linear_num_key_heads"] = meta.count("ssm.group_count");
        cfg["linear_num_value_heads"] = meta.count("ssm.time_step_rank");
        cfg["linear_key_head_dim"] = meta.count("ssm.state_size");
        cfg["linear_conv_kernel_dim"] = meta.count("ssm.conv_kernel");
        const uint64_t inner = meta.count("ssm.inner_size"), nv = cfg["linear_num_value_heads"].get<uint64_t>();
        if (meta.status() && inner % nv != 0) meta.fail(meta.name("ssm.inner_size") + " is not a multiple of " + meta.name("ssm.time_step_rank"));
        cfg["linear_value_head_dim"] = nv ? inner / nv : 0;
        cfg["full_attention_interval"] = meta.count("full_attention_interval", 4);
        if (fam == Family::Qwen3Next) {  // as qwen2moe: a layer without a router is a dense one
            json dense = json::array();
            for (uint32_t l = 0; l < layers && l < 4096; ++l)
                if (!has_tensor(layer_prefix(l) + "ffn_gate_inp.weight")) dense.push_back(l);
            cfg["mlp_only_layers"] = dense;
            if (!dense.empty()) cfg["intermediate_size"] = meta.count("feed_forward_length");
        }
    } else if (deepseek || glm4) {
        cfg["moe_intermediate_size"] = meta.count("expert_feed_forward_length");
        cfg["intermediate_size"] = meta.count("feed_forward_length");
        cfg["n_shared_experts"] = meta.count_or_zero("expert_shared_count");
        cfg["first_k_dense_replace"] = meta.count_or_zero("leading_dense_block_count");
        cfg["n_group"] = meta.count("expert_group_count", 1);
        cfg["topk_group"] = meta.count("expert_group_used_count", 1);
        cfg["routed_scaling_factor"] = meta.real("expert_weights_scale", 1.0);
        // 2: sigmoid (gguf.ExpertGatingFuncType). deepseek2 files made from a config without scoring_func (the
        // transformers 5 spelling) have no key: a selection bias (exp_probs_b) is DeepSeek-V3's sigmoid router.
        const uint64_t gating = meta.has("expert_gating_func") ? meta.count("expert_gating_func") : 0;
        bool any_selection_bias = false;
        for (uint32_t l = 0; l < layers && l < 4096 && !any_selection_bias; ++l) any_selection_bias = has_tensor(layer_prefix(l) + "exp_probs_b.bias");
        if (meta.status() && gating != 2 && !(gating == 0 && any_selection_bias))
            meta.fail(meta.name("expert_gating_func") + (gating ? " is not sigmoid" : " is missing and there is no exp_probs_b") +
                      "; only sigmoid routing with a selection bias (DeepSeek-V3, GLM-4.5) is supported");
        if (glm4) {
            cfg["attention_bias"] = has_tensor(b0 + "attn_q.bias");
            cfg["use_qk_norm"] = has_tensor(b0 + "attn_q_norm.weight");
        }
    } else if (minimax) {
        // llama.cpp's minimax-m2: sigmoid scores with exp_probs_b, always renormalised, no scaling; its converter
        // writes expert_gating_func only from a hub config's scoring_func.
        cfg["intermediate_size"] = meta.count("expert_feed_forward_length");
        if (meta.has("expert_gating_func") && meta.count("expert_gating_func") != 2)
            meta.fail(meta.name("expert_gating_func") + " is not sigmoid; minimax-m2 routes by sigmoid scores");
        if (meta.has("expert_weights_scale") && meta.real("expert_weights_scale") != 1.0 && meta.real("expert_weights_scale") != 0.0)
            meta.fail(meta.name("expert_weights_scale") + " is set; minimax-m2 does not scale its routing weights");
    } else if (gpt_oss) {
        cfg["intermediate_size"] = meta.has("expert_feed_forward_length") ? meta.count("expert_feed_forward_length")
                                                                          : meta.count("feed_forward_length");
        cfg["attention_bias"] = has_tensor(b0 + "attn_q.bias");
        // llama.cpp's gpt-oss: layers 0, 2, 4, ... attend to a sliding window, the others to everything.
        if (meta.has("attention.sliding_window")) {
            cfg["sliding_window"] = meta.count("attention.sliding_window");
            json types = json::array();
            for (uint32_t l = 0; l < layers && l < 4096; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
            cfg["layer_types"] = types;
        }
    } else {
        // Mixtral and OLMoE: the expert width is the feed-forward length (newer files also say it explicitly).
        cfg["intermediate_size"] = meta.has("expert_feed_forward_length") ? meta.count("expert_feed_forward_length")
                                                                          : meta.count("feed_forward_length");
    }
    // llama.cpp always renormalises qwen3moe's top-k weights; elsewhere the key says so.
    if (fam != Family::Mixtral && !gpt_oss) cfg["norm_topk_prob"] = meta.flag("expert_weights_norm", fam == Family::Qwen3Moe || hybrid);
    if (fam == Family::Olmoe && meta.has("attention.clamp_kqv")) cfg["clip_qkv"] = meta.real("attention.clamp_kqv");
    if (const std::string scaling = meta.text("rope.scaling.type"); scaling == "yarn") {
        rope["rope_type"] = "yarn";
        rope["factor"] = meta.real("rope.scaling.factor");
        rope["original_max_position_embeddings"] = meta.count("rope.scaling.original_context_length");
        rope["beta_fast"] = meta.real("rope.scaling.yarn_beta_fast", 32.0);
        rope["beta_slow"] = meta.real("rope.scaling.yarn_beta_slow", 1.0);
        // deepseek2 stores 0.1·mscale_all_dim; llama.cpp takes mscale equal to it, as the released configs have.
        if (meta.has("rope.scaling.yarn_log_multiplier")) {
            const double mscale = meta.real("rope.scaling.yarn_log_multiplier") / 0.1;
            rope["mscale"] = mscale;
            rope["mscale_all_dim"] = mscale;
        }
        // The released gpt-oss configs say truncate: false; GGUF has no key for it.
        if (gpt_oss) rope["truncate"] = false;
    } else if (!scaling.empty() && scaling != "none") {
        meta.fail(meta.name("rope.scaling.type") + " '" + scaling + "' is not supported (yarn)");
    }
    if (!deepseek && !glm4 && !minimax && meta.has("expert_gating_func") && meta.count("expert_gating_func") != 1)  // 1: softmax
        meta.fail(meta.name("expert_gating_func") + " is not softmax; only softmax routing is supported for " + arch);
    if (!meta.status()) return meta.status();

    const uint64_t head_dim = cfg.contains("head_dim") ? cfg["head_dim"].get<uint64_t>() : hidden / heads;
    if (!deepseek && meta.has("rope.dimension_count")) {
        const uint64_t rot = meta.count("rope.dimension_count");
        if ((glm4 || hybrid) && rot < head_dim) {
            rope["partial_rotary_factor"] = double(rot) / double(head_dim);
        } else if (minimax) {
            cfg["rotary_dim"] = rot;  // MiniMax-M2's own field, which the HF converter reads for this family
        } else if (rot != head_dim) {
            return error("GGUF metadata: " + meta.name("rope.dimension_count") + " differs from the head size (partial rotary embeddings are " +
                         "supported for glm4moe, minimax-m2, qwen3next and qwen35moe only)");
        }
    }
    cfg["rope_parameters"] = rope;

    // The vocabulary is the embedding's rows; the token list may be shorter (never longer, checked later).
    auto embd = file.tensors().find("token_embd.weight");
    if (meta.has("vocab_size")) {
        cfg["vocab_size"] = meta.count("vocab_size");
    } else if (embd != file.tensors().end() && embd->second.ne.size() == 2) {
        cfg["vocab_size"] = embd->second.ne[1];
    } else {
        return error("GGUF file has no token_embd.weight matrix to take the vocabulary size from");
    }
    if (!file.tensors().count("output.weight")) cfg["tie_word_embeddings"] = true;
    for (const char* key : {"bos_token_id", "eos_token_id"})
        if (auto it = md.find(std::string("tokenizer.ggml.") + key); it != md.end() && it->is_number_unsigned()) cfg[key] = *it;
    if (!meta.status()) return meta.status();
    return cfg;
}

// Each planned tensor from its GGUF place (gguf_names.h). Older files keep one tensor per expert
// (blk.L.ffn_gate.E.weight) instead of a stack.
void map_tensors(GgufSource& src, const Plan& plan) {
    for (size_t i = 0; i < plan.specs.size(); ++i) {
        const std::string& hf = plan.sources[i];
        const std::optional<GgufPlace> place = gguf_place(plan.family, plan.hp, plan.specs[i]);
        if (!place) {
            src.map(hf, plan.specs[i].name + " (no GGUF tensor)");
            continue;
        }
        if (place->row_block) {
            src.map_part(hf, place->name, place->row_block, place->part, place->parts);
        } else if (place->expert < 0) {
            src.map(hf, place->name, place->permute_heads, place->as_row, place->flattened);
        } else if (src.has(place->name)) {
            src.map_expert(hf, place->name, uint64_t(place->expert), plan.hp.n_experts);
        } else {
            const std::string stack = "_exps.weight";
            const bool stacked_name = place->name.size() > stack.size() && place->name.ends_with(stack);
            const auto legacy = [&](uint64_t e) {
                return place->name.substr(0, place->name.size() - stack.size()) + "." + std::to_string(e) + ".weight";
            };
            src.map(hf, stacked_name ? legacy(uint64_t(place->expert)) : place->name);
            // One tensor per expert: one past the model's experts would be silently left out.
            if (stacked_name && uint64_t(place->expert) + 1 == plan.hp.n_experts && src.has(legacy(plan.hp.n_experts)))
                src.fail(error("tensor " + legacy(plan.hp.n_experts) + " is an expert beyond the model's " +
                               std::to_string(plan.hp.n_experts) + " (expert_count)"));
        }
    }
}

// Every planned tensor exists with the shape the metadata implies; errors name the GGUF tensor.
Status check_shapes(const Plan& plan, const GgufSource& src) {
    size_t i = 0;
    for (const PlannedSection& s : plan.sections) {
        for (const PlannedTensor& t : s.tensors) {
            const std::string& hf = plan.sources[i++];
            const std::string gguf = src.gguf_name(hf);
            const SourceTensor* st = src.find(hf);
            if (st == nullptr) return error("tensor " + gguf + " is missing");
            const std::vector<uint64_t> want = t.n_dims == 1 ? std::vector<uint64_t>{t.rows} : std::vector<uint64_t>{t.rows, t.cols};
            if (st->shape != want)
                return error("tensor " + gguf + " has shape [" + join(st->shape) + "] (rows, columns), the metadata implies [" + join(want) + "]");
        }
    }
    return Status::ok();
}

// Matrices quantised in a type the engine computes on keep their blocks: the plan stores them in that type,
// whatever was requested for the float ones.
void carry_blocks(Plan& plan, GgufSource& src) {
    size_t i = 0;
    for (PlannedSection& s : plan.sections)
        for (PlannedTensor& t : s.tensors) {
            const size_t at = i++;
            if (plan.specs[at].kind != schema::Kind::Matrix) continue;
            if (const std::optional<WeightType> carried = src.carried_type(plan.sources[at])) {
                t.type = *carried;
                src.carry(plan.sources[at]);
            }
        }
}

// Puts the HF tokenizer files the GGUF metadata stands for into the plan, as convert_hf() does for a directory.
Status add_tokenizer(const json& md, Plan& plan, ConvertSummary& summary) {
    if (!gguf_has_tokenizer(md)) return Status::ok();
    auto files = hf_tokenizer_from_gguf(md);
    if (!files) return files.status();
    auto parsed = Tokenizer::from_json(files->tokenizer_json, files->tokenizer_config_json);
    if (!parsed) return error("the tokenizer made from the GGUF metadata does not load: " + parsed.message());
    if (parsed->vocab_size() > static_cast<int32_t>(plan.hp.vocab_size))
        return error("GGUF metadata: " + std::to_string(parsed->vocab_size()) + " tokens do not fit the model's vocabulary of " +
                     std::to_string(plan.hp.vocab_size));
    using format::kNone;
    using format::SectionKind;
    auto at = plan.sections.begin();
    at = plan.sections.insert(at, PlannedSection{SectionKind::TokenizerJson, kNone, kNone, {}, std::move(files->tokenizer_json)}) + 1;
    at = plan.sections.insert(at, PlannedSection{SectionKind::TokenizerConfig, kNone, kNone, {}, std::move(files->tokenizer_config_json)}) + 1;
    if (!files->chat_template.empty()) {
        plan.sections.insert(at, PlannedSection{SectionKind::ChatTemplate, kNone, kNone, {}, std::move(files->chat_template)});
        summary.has_chat_template = true;
    }
    summary.has_tokenizer = true;
    return Status::ok();
}

}  // namespace

namespace {

// Everything convert_gguf decides before it reads a weight: the plan at `type` with src's tensors mapped onto it,
// blocks the engine computes on carried over, the tokenizer added (what preview_gguf sizes without writing).
Status plan_gguf(const GgufFile& file, const std::string& path, WeightType type, GgufSource& src, Plan* plan, ConvertSummary* summary) {
    const json& md = file.metadata();
    auto arch_it = md.find("general.architecture");
    if (arch_it == md.end() || !arch_it->is_string()) return error(path + ": GGUF metadata: missing general.architecture");
    const std::string arch = arch_it->get<std::string>();
    auto info = arch_info(arch, md);
    if (!info) return error(path + ": " + info.message());
    auto cfg = config_from_metadata(file, arch, info.value());
    if (!cfg) return error(path + ": " + cfg.message());
    auto planned = plan_model(cfg.value(), {}, type);
    if (!planned) {
        // plan_model speaks of config.json; here that config was derived from the GGUF metadata.
        std::string why = planned.message();
        if (why.rfind("config.json: ", 0) == 0) why = "GGUF metadata: " + why.substr(13);
        return error(path + ": " + why);
    }
    *plan = std::move(planned.value());
    map_tensors(src, *plan);
    if (!src.status()) return error(path + ": " + src.status().message());
    if (Status s = check_shapes(*plan, src); !s) return error(path + ": " + s.message());
    carry_blocks(*plan, src);
    summary->family = plan->family;
    if (Status s = add_tokenizer(md, *plan, *summary); !s) return error(path + ": " + s.message());
    return {};
}

}  // namespace

Result<ConvertSummary> convert_gguf(const std::string& path, const std::string& out_path, const ConvertOptions& options) {
    auto file = GgufFile::open(path);
    if (!file) return file.status();
    GgufSource src(*file.value());
    Plan plan;
    ConvertSummary summary;
    if (Status s = plan_gguf(*file.value(), path, options.type, src, &plan, &summary); !s) return s;
    return write_plan(plan, [&src](const std::string& name) { return src.find(name); }, path, out_path, options, summary,
                      [&src](const std::string& name) { return src.load(name); });
}

Result<ConvertPreview> preview_gguf(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file) return file.status();
    ConvertPreview preview;
    std::error_code ec;
    preview.source_bytes = std::filesystem::file_size(path, ec);
    for (const WeightTypeInfo& w : weight_types()) {
        if (!w.quantisable) continue;
        GgufSource src(*file.value());
        Plan plan;
        ConvertSummary summary;
        if (Status s = plan_gguf(*file.value(), path, w.type, src, &plan, &summary); !s) return s;
        auto size = BinWriter::planned_size(plan.family, plan.hp, plan.sections);
        if (!size) return error(path + ": " + size.message());
        if (preview.output_bytes.empty()) describe_plan(plan, summary, &preview);
        preview.output_bytes.emplace_back(w.type, size.value());
    }
    return preview;
}

}  // namespace colibri::tools
