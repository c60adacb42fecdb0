// GGUF import: metadata mapped onto an HF-style config, tensors mapped onto HF names (undoing llama.cpp's
// rotary row permutation of q and k, slicing the stacked expert tensors), then the shared writer loop.
#include <map>

#include "convert.h"
#include "convert_plan.h"
#include "gguf.h"

namespace colibri::tools {

using nlohmann::json;

namespace {

Result<SourceDType> source_dtype(const GgufTensor& t) {
    switch (t.type) {
        case 0: return SourceDType::F32;
        case 1: return SourceDType::F16;
        case 30: return SourceDType::BF16;
        default: return error("tensor " + t.name + ": ggml type " + ggml_type_name(t.type) + " cannot be imported yet (f32, f16, bf16)");
    }
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

class GgufSource {
public:
    explicit GgufSource(const GgufFile& f) : file_(f) {}
    Status status() const { return status_; }
    const SourceTensor* find(const std::string& name) const {
        auto it = map_.find(name);
        return it == map_.end() ? nullptr : &it->second;
    }
    bool has(const std::string& gguf_name) const { return file_.tensors().count(gguf_name) != 0; }

    // Whole 1-d or 2-d tensor under an HF name.
    void map(const std::string& hf, const std::string& gguf, uint32_t unpermute_heads = 0) {
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;  // a missing tensor is reported by write_plan
        const GgufTensor& g = it->second;
        auto dtype = source_dtype(g);
        if (!dtype) return fail(dtype.status());
        if (g.ne.size() > 2) return fail(error("tensor " + gguf + " has " + std::to_string(g.ne.size()) + " dims"));
        SourceTensor t{hf, dtype.value(), {}, g.data, g.size, {}};
        t.shape = g.ne.size() == 1 ? std::vector<uint64_t>{g.ne[0]} : std::vector<uint64_t>{g.ne[1], g.ne[0]};
        if (unpermute_heads) {
            if (t.shape.size() != 2 || t.shape[0] % (2 * uint64_t(unpermute_heads)) != 0)
                return fail(error("tensor " + gguf + " rows do not split into " + std::to_string(unpermute_heads) + " heads"));
            t.row_order = unpermute_rows(t.shape[0], unpermute_heads);
        }
        map_.emplace(hf, std::move(t));
    }
    // Expert e of a stacked [n_expert, rows, cols] tensor.
    void map_expert(const std::string& hf, const std::string& gguf, uint64_t e) {
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;
        const GgufTensor& g = it->second;
        auto dtype = source_dtype(g);
        if (!dtype) return fail(dtype.status());
        if (g.ne.size() != 3 || e >= g.ne[2]) return fail(error("tensor " + gguf + " is not a stack of experts"));
        const uint64_t bytes = g.size / g.ne[2];
        map_.emplace(hf, SourceTensor{hf, dtype.value(), {g.ne[1], g.ne[0]}, g.data + e * bytes, bytes, {}});
    }

private:
    void fail(const Status& s) {
        if (status_) status_ = s;
    }
    const GgufFile& file_;
    std::map<std::string, SourceTensor> map_;
    Status status_;
};

// Reads a metadata number, failing with the key's name.
class Meta {
public:
    Meta(const json& m, std::string arch) : m_(m), arch_(std::move(arch)) {}
    const json* find(const std::string& key) const {
        auto it = m_.find(arch_ + "." + key);
        return it == m_.end() || it->is_null() ? nullptr : &*it;
    }
    json require(const std::string& key) {
        const json* v = find(key);
        if (v == nullptr || !v->is_number()) {
            if (status_) status_ = error("GGUF metadata: missing " + arch_ + "." + key);
            return 0;
        }
        return *v;
    }
    Status status() const { return status_; }

private:
    const json& m_;
    std::string arch_;
    Status status_;
};

}  // namespace

Result<ConvertSummary> convert_gguf(const std::string& path, const std::string& out_path, const ConvertOptions& options) {
    auto file = GgufFile::open(path);
    if (!file) return file.status();
    const json& md = file.value()->metadata();
    const std::string arch = md.value("general.architecture", std::string());
    Meta meta(md, arch);
    if (arch != "llama" || !meta.find("expert_count") || meta.find("expert_count")->get<uint64_t>() == 0)
        return error(path + ": GGUF architecture '" + arch + "' is not supported yet (llama with experts, i.e. Mixtral)");

    json cfg;
    cfg["model_type"] = "mixtral";
    cfg["hidden_size"] = meta.require("embedding_length");
    cfg["num_hidden_layers"] = meta.require("block_count");
    cfg["num_attention_heads"] = meta.require("attention.head_count");
    cfg["num_key_value_heads"] = meta.find("attention.head_count_kv") ? *meta.find("attention.head_count_kv") : cfg["num_attention_heads"];
    cfg["num_local_experts"] = meta.require("expert_count");
    cfg["num_experts_per_tok"] = meta.require("expert_used_count");
    cfg["intermediate_size"] = meta.find("expert_feed_forward_length") ? meta.require("expert_feed_forward_length")
                                                                       : meta.require("feed_forward_length");
    cfg["rms_norm_eps"] = meta.require("attention.layer_norm_rms_epsilon");
    cfg["rope_theta"] = meta.find("rope.freq_base") ? *meta.find("rope.freq_base") : json(10000.0);
    if (meta.find("context_length")) cfg["max_position_embeddings"] = *meta.find("context_length");
    if (meta.find("vocab_size")) {
        cfg["vocab_size"] = *meta.find("vocab_size");
    } else if (md.contains("tokenizer.ggml.tokens") && md["tokenizer.ggml.tokens"].is_array()) {
        cfg["vocab_size"] = md["tokenizer.ggml.tokens"].size();
    }
    if (md.contains("tokenizer.ggml.bos_token_id")) cfg["bos_token_id"] = md["tokenizer.ggml.bos_token_id"];
    if (md.contains("tokenizer.ggml.eos_token_id")) cfg["eos_token_id"] = md["tokenizer.ggml.eos_token_id"];
    if (!meta.status()) return error(path + ": " + meta.status().message());
    const uint32_t heads = cfg["num_attention_heads"].get<uint32_t>(), kv_heads = cfg["num_key_value_heads"].get<uint32_t>();
    const uint32_t head_dim = heads ? cfg["hidden_size"].get<uint32_t>() / heads : 0;
    if (meta.find("rope.dimension_count") && meta.find("rope.dimension_count")->get<uint32_t>() != head_dim)
        return error(path + ": partial rotary embeddings (rope.dimension_count != head size) are not supported");
    if (!file.value()->tensors().count("output.weight")) cfg["tie_word_embeddings"] = true;

    auto planned = plan_model(cfg, {}, options.type);
    if (!planned) {
        // plan_model speaks of config.json; here that config was derived from the GGUF metadata.
        std::string why = planned.message();
        if (why.rfind("config.json: ", 0) == 0) why = "GGUF metadata: " + why.substr(13);
        return error(path + ": " + why);
    }
    const Plan& plan = planned.value();

    GgufSource src(*file.value());
    src.map("model.embed_tokens.weight", "token_embd.weight");
    src.map("lm_head.weight", "output.weight");
    src.map("model.norm.weight", "output_norm.weight");
    for (uint32_t l = 0; l < plan.hp.n_layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
        src.map(h + "input_layernorm.weight", b + "attn_norm.weight");
        src.map(h + "post_attention_layernorm.weight", b + "ffn_norm.weight");
        src.map(h + "self_attn.q_proj.weight", b + "attn_q.weight", heads);
        src.map(h + "self_attn.k_proj.weight", b + "attn_k.weight", kv_heads);
        src.map(h + "self_attn.v_proj.weight", b + "attn_v.weight");
        src.map(h + "self_attn.o_proj.weight", b + "attn_output.weight");
        src.map(h + "block_sparse_moe.gate.weight", b + "ffn_gate_inp.weight");
        for (uint32_t e = 0; e < plan.hp.n_experts; ++e) {
            const std::string x = h + "block_sparse_moe.experts." + std::to_string(e) + ".";
            const std::string es = std::to_string(e);
            if (src.has(b + "ffn_gate_exps.weight")) {  // stacked experts (current llama.cpp)
                src.map_expert(x + "w1.weight", b + "ffn_gate_exps.weight", e);
                src.map_expert(x + "w3.weight", b + "ffn_up_exps.weight", e);
                src.map_expert(x + "w2.weight", b + "ffn_down_exps.weight", e);
            } else {  // one tensor per expert (older files)
                src.map(x + "w1.weight", b + "ffn_gate." + es + ".weight");
                src.map(x + "w3.weight", b + "ffn_up." + es + ".weight");
                src.map(x + "w2.weight", b + "ffn_down." + es + ".weight");
            }
        }
    }
    if (!src.status()) return error(path + ": " + src.status().message());
    ConvertSummary summary;
    summary.family = plan.family;
    return write_plan(plan, [&src](const std::string& name) { return src.find(name); }, path, out_path, options, summary);
}

}  // namespace colibri::tools
