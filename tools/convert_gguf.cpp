// GGUF import. llama.cpp's hyper-parameter keys are read (each checked, errors name the key) into the HF-style
// config that plan_model() plans from; GGUF tensors are mapped onto the HF names of that plan (undoing the
// rotary row permutation llama.cpp applies to llama q/k, slicing stacked expert tensors, dequantising Q8_0,
// Q4_0, Q4_K and Q6_K tensors on demand); the tokenizer.ggml.* keys become the HF tokenizer files; then the
// writer loop shared with the HF importer streams the .bin.
//
// Architectures: llama with experts (Mixtral), qwen2moe (shared expert with a sigmoid gate, q/k/v biases),
// olmoe (q/k RMSNorms over the whole projection). llama.cpp permutes q/k rows only for llama.
#include <map>

#include "convert.h"
#include "convert_plan.h"
#include "engine/tokenizer.h"
#include "ggml_dequant.h"
#include "gguf.h"
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

    // A whole 1-d or 2-d tensor. as_row: a 1-d tensor is taken as a [1, n] matrix (a gate vector).
    void map(const std::string& hf, const std::string& gguf, uint32_t unpermute_heads = 0, bool as_row = false) {
        wanted_[hf] = gguf;
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;  // a missing tensor is reported by check_shapes
        const GgufTensor& g = it->second;
        if (g.ne.size() > 2) return fail(error("tensor " + gguf + " has " + std::to_string(g.ne.size()) + " dims, expected at most 2"));
        std::vector<uint64_t> shape = g.ne.size() == 1 ? std::vector<uint64_t>{g.ne[0]} : std::vector<uint64_t>{g.ne[1], g.ne[0]};
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
    // Expert e of a stacked [n_expert, rows, cols] tensor.
    void map_expert(const std::string& hf, const std::string& gguf, uint64_t expert) {
        wanted_[hf] = gguf;
        auto it = file_.tensors().find(gguf);
        if (it == file_.tensors().end() || !status_) return;
        const GgufTensor& g = it->second;
        if (g.ne.size() != 3 || expert >= g.ne[2])
            return fail(error("tensor " + gguf + " has shape [" + join(g.ne) + "] (ggml order), not a stack of experts"));
        const uint64_t bytes = g.size / g.ne[2];
        Entry e;
        if (!describe(g, {g.ne[1], g.ne[0]}, g.data + expert * bytes, bytes, e)) return;
        map_.emplace(hf, std::move(e));
    }

    // Makes the data of a quantised tensor available (dequantised); others need nothing.
    Status load(const std::string& hf) {
        auto it = map_.find(hf);
        if (it == map_.end() || !it->second.quantized) return Status::ok();
        Entry& e = it->second;
        const uint64_t n = e.tensor.elements();
        buffer_.resize(n);
        ggml_dequantize_row(e.ggml_type, e.quantized, buffer_.data(), n);
        // The quantised pages are done with; the f32 buffer is what the writer reads now.
        release_source_pages(SourceTensor{hf, SourceDType::F32, {}, e.quantized, e.quantized_size, {}});
        e.tensor.data = reinterpret_cast<const uint8_t*>(buffer_.data());
        return Status::ok();
    }

private:
    struct Entry {
        SourceTensor tensor;
        uint32_t ggml_type = 0;
        const uint8_t* quantized = nullptr;  // non-null: tensor.data is filled by load()
        uint64_t quantized_size = 0;
    };

    bool describe(const GgufTensor& g, std::vector<uint64_t> shape, const uint8_t* data, uint64_t size, Entry& e) {
        e.tensor = SourceTensor{"", SourceDType::F32, std::move(shape), data, size, {}};
        e.ggml_type = g.type;
        switch (static_cast<GgmlType>(g.type)) {
            case GgmlType::F32: return true;
            case GgmlType::F16: e.tensor.dtype = SourceDType::F16; return true;
            case GgmlType::BF16: e.tensor.dtype = SourceDType::BF16; return true;
            default: break;
        }
        if (!ggml_is_dequantizable(g.type)) {
            fail(error("tensor " + g.name + " has ggml type " + ggml_type_name(g.type) +
                       ", which cannot be imported (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k)"));
            return false;
        }
        e.quantized = data;
        e.quantized_size = size;
        e.tensor.data = nullptr;
        e.tensor.size = e.tensor.elements() * 4;
        return true;
    }
    void fail(const Status& s) {
        if (status_) status_ = s;
    }

    const GgufFile& file_;
    std::map<std::string, Entry> map_;
    std::map<std::string, std::string> wanted_;
    std::vector<float> buffer_;
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
    bool permuted_qk;  // llama.cpp interleaves the rotary halves of q/k rows (llama only)
};

Result<ArchInfo> arch_info(const std::string& arch, const json& md) {
    if (arch == "llama") {
        auto it = md.find("llama.expert_count");
        if (it == md.end() || !it->is_number_unsigned() || it->get<uint64_t>() == 0)
            return error("GGUF architecture 'llama' without experts is a dense model; only MoE models are supported");
        return ArchInfo{Family::Mixtral, true};
    }
    if (arch == "qwen2moe") return ArchInfo{Family::Qwen2Moe, false};
    if (arch == "olmoe") return ArchInfo{Family::Olmoe, false};
    return error("GGUF architecture '" + arch + "' is not supported (llama with experts, qwen2moe, olmoe)");
}

std::string layer_prefix(uint32_t l) { return "blk." + std::to_string(l) + "."; }

// The HF config.json that the GGUF metadata stands for, in the fields plan_model() reads.
Result<json> config_from_metadata(const GgufFile& file, const std::string& arch, const ArchInfo& info) {
    const json& md = file.metadata();
    Meta meta(md, arch);
    json cfg;
    cfg["model_type"] = format::family_name(info.family);
    const uint64_t hidden = meta.count("embedding_length"), layers = meta.count("block_count");
    const uint64_t heads = meta.count("attention.head_count");
    cfg["hidden_size"] = hidden;
    cfg["num_hidden_layers"] = layers;
    cfg["num_attention_heads"] = heads;
    cfg["num_key_value_heads"] = meta.count("attention.head_count_kv", heads);
    cfg[info.family == Family::Mixtral ? "num_local_experts" : "num_experts"] = meta.count("expert_count");
    cfg["num_experts_per_tok"] = meta.count("expert_used_count");
    cfg["rms_norm_eps"] = meta.real("attention.layer_norm_rms_epsilon");
    cfg["rope_theta"] = meta.real("rope.freq_base", 10000.0);
    if (meta.has("context_length")) cfg["max_position_embeddings"] = meta.count("context_length");
    if (meta.has("attention.key_length") || meta.has("attention.value_length")) {
        const uint64_t k = meta.count("attention.key_length"), v = meta.count("attention.value_length");
        if (meta.status() && k != v) meta.fail(meta.name("attention.key_length") + " differs from " + meta.name("attention.value_length"));
        cfg["head_dim"] = k;
    }
    if (info.family == Family::Qwen2Moe) {
        cfg["moe_intermediate_size"] = meta.count("expert_feed_forward_length");
        if (meta.has("expert_shared_feed_forward_length") || file.tensors().count("blk.0.ffn_gate_shexp.weight"))
            cfg["shared_expert_intermediate_size"] = meta.count("expert_shared_feed_forward_length");
        // llama.cpp keeps no decoder_sparse_step / mlp_only_layers: a layer without a router is a dense one.
        json dense = json::array();
        for (uint32_t l = 0; l < layers && l < 4096; ++l)
            if (!file.tensors().count(layer_prefix(l) + "ffn_gate_inp.weight")) dense.push_back(l);
        cfg["mlp_only_layers"] = dense;
        if (!dense.empty()) cfg["intermediate_size"] = meta.count("feed_forward_length");
    } else {
        // Mixtral and OLMoE: the expert width is the feed-forward length (newer files also say it explicitly).
        cfg["intermediate_size"] = meta.has("expert_feed_forward_length") ? meta.count("expert_feed_forward_length")
                                                                          : meta.count("feed_forward_length");
    }
    if (info.family != Family::Mixtral) cfg["norm_topk_prob"] = meta.flag("expert_weights_norm", false);
    if (info.family == Family::Olmoe && meta.has("attention.clamp_kqv")) cfg["clip_qkv"] = meta.real("attention.clamp_kqv");
    if (const std::string scaling = meta.text("rope.scaling.type"); !scaling.empty() && scaling != "none")
        meta.fail(meta.name("rope.scaling.type") + " '" + scaling + "' is not supported");
    if (meta.has("expert_gating_func") && meta.count("expert_gating_func") != 1)  // 1: softmax (gguf.ExpertGatingFuncType)
        meta.fail(meta.name("expert_gating_func") + " is not softmax; only softmax routing is supported");
    if (!meta.status()) return meta.status();

    const uint64_t head_dim = cfg.contains("head_dim") ? cfg["head_dim"].get<uint64_t>() : hidden / heads;
    if (meta.has("rope.dimension_count") && meta.count("rope.dimension_count") != head_dim)
        return error("GGUF metadata: " + meta.name("rope.dimension_count") + " differs from the head size (partial rotary embeddings are not supported)");

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

void map_tensors(GgufSource& src, const format::HyperParams& hp, const ArchInfo& info, uint32_t heads, uint32_t kv_heads) {
    const bool mixtral = info.family == Family::Mixtral;
    src.map("model.embed_tokens.weight", "token_embd.weight");
    src.map("lm_head.weight", "output.weight");
    src.map("model.norm.weight", "output_norm.weight");
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        const std::string b = layer_prefix(l), h = "model.layers." + std::to_string(l) + ".";
        const std::string attn = h + "self_attn.";
        src.map(h + "input_layernorm.weight", b + "attn_norm.weight");
        src.map(h + "post_attention_layernorm.weight", b + "ffn_norm.weight");
        src.map(attn + "q_proj.weight", b + "attn_q.weight", info.permuted_qk ? heads : 0);
        src.map(attn + "k_proj.weight", b + "attn_k.weight", info.permuted_qk ? kv_heads : 0);
        src.map(attn + "v_proj.weight", b + "attn_v.weight");
        src.map(attn + "o_proj.weight", b + "attn_output.weight");
        for (const char* p : {"q", "k", "v"}) src.map(attn + p + "_proj.bias", b + "attn_" + p + ".bias");
        src.map(attn + "q_norm.weight", b + "attn_q_norm.weight");
        src.map(attn + "k_norm.weight", b + "attn_k_norm.weight");

        const std::string moe = h + (mixtral ? "block_sparse_moe." : "mlp.");
        src.map(moe + "gate.weight", b + "ffn_gate_inp.weight");
        const char* const hf_proj[3] = {mixtral ? "w1" : "gate_proj", mixtral ? "w3" : "up_proj", mixtral ? "w2" : "down_proj"};
        const char* const gguf_proj[3] = {"ffn_gate", "ffn_up", "ffn_down"};
        const bool stacked = src.has(b + "ffn_gate_exps.weight");  // current llama.cpp; older files have one tensor per expert
        for (uint32_t e = 0; e < hp.n_experts; ++e) {
            const std::string x = moe + "experts." + std::to_string(e) + ".";
            for (int p = 0; p < 3; ++p) {
                if (stacked) src.map_expert(x + hf_proj[p] + ".weight", b + gguf_proj[p] + "_exps.weight", e);
                else src.map(x + hf_proj[p] + ".weight", b + gguf_proj[p] + "." + std::to_string(e) + ".weight");
            }
        }
        for (int p = 0; p < 3; ++p) {
            src.map(moe + "shared_expert." + hf_proj[p] + ".weight", b + gguf_proj[p] + "_shexp.weight");
            src.map(h + "mlp." + hf_proj[p] + ".weight", b + gguf_proj[p] + ".weight");  // dense layers
        }
        src.map(moe + "shared_expert_gate.weight", b + "ffn_gate_inp_shexp.weight", 0, true);
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

Result<ConvertSummary> convert_gguf(const std::string& path, const std::string& out_path, const ConvertOptions& options) {
    auto file = GgufFile::open(path);
    if (!file) return file.status();
    const json& md = file.value()->metadata();
    auto arch_it = md.find("general.architecture");
    if (arch_it == md.end() || !arch_it->is_string()) return error(path + ": GGUF metadata: missing general.architecture");
    const std::string arch = arch_it->get<std::string>();
    auto info = arch_info(arch, md);
    if (!info) return error(path + ": " + info.message());

    auto cfg = config_from_metadata(*file.value(), arch, info.value());
    if (!cfg) return error(path + ": " + cfg.message());
    auto planned = plan_model(cfg.value(), {}, options.type);
    if (!planned) {
        // plan_model speaks of config.json; here that config was derived from the GGUF metadata.
        std::string why = planned.message();
        if (why.rfind("config.json: ", 0) == 0) why = "GGUF metadata: " + why.substr(13);
        return error(path + ": " + why);
    }
    Plan plan = std::move(planned.value());

    GgufSource src(*file.value());
    map_tensors(src, plan.hp, info.value(), plan.hp.n_heads, plan.hp.n_kv_heads);
    if (!src.status()) return error(path + ": " + src.status().message());
    if (Status s = check_shapes(plan, src); !s) return error(path + ": " + s.message());

    ConvertSummary summary;
    summary.family = plan.family;
    if (Status s = add_tokenizer(md, plan, summary); !s) return error(path + ": " + s.message());
    return write_plan(plan, [&src](const std::string& name) { return src.find(name); }, path, out_path, options, summary,
                      [&src](const std::string& name) { return src.load(name); });
}

}  // namespace colibri::tools
