#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "convert.h"
#include "convert_plan.h"
#include "engine/bin_writer.h"
#include "engine/json_depth.h"
#include "engine/mapped_file.h"
#include "engine/model_file.h"
#include "engine/schema.h"
#include "engine/thread_pool.h"
#include "engine/tokenizer.h"
#include "kernels/half.h"
#include "kernels/matvec.h"
#include "quantize.h"
#include "safetensors.h"

namespace colibri::tools {

using nlohmann::json;
using namespace format;
namespace fs = std::filesystem;

namespace {

// A FIFO or device under one of these names is refused, not waited on (read_small_file).
Result<std::string> read_text(const fs::path& p) { return read_small_file(p.string()); }

// An optional file: empty when absent, an error when present but unreadable (so it is not silently dropped).
Result<std::optional<std::string>> read_optional(const fs::path& p) {
    std::error_code ec;
    if (!fs::exists(p, ec) && !fs::is_symlink(p, ec)) return std::optional<std::string>();
    auto text = read_text(p);
    if (!text) return text.status();
    return std::optional<std::string>(std::move(text.value()));
}

// Parses a JSON file of the model directory; a document nested past kMaxJsonDepth is refused before parsing.
Result<json> parse_json_file(std::string_view text, const std::string& name) {
    if (json_too_deep(text)) return error(name + ": nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return error(name + ": not valid JSON");
    if (!j.is_object()) return error(name + ": the top level is not a JSON object");
    return j;
}

// Typed access to config.json fields with one-line errors naming the field. Holds a reference: copying a JSON
// value recurses once per level of nesting.
class Config {
public:
    explicit Config(const json& j) : j_(j) {}
    Status status() const { return status_; }

    uint32_t u32(const char* key, std::optional<uint32_t> fallback = std::nullopt) {
        const json* v = find(key);
        if (v == nullptr) return missing(key, fallback);
        if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (int64_t(1) << 31)) {
            fail(std::string("field '") + key + "' must be a positive integer");
            return 0;
        }
        return v->get<uint32_t>();
    }
    float number(const char* key, std::optional<float> fallback = std::nullopt) {
        const json* v = find(key);
        if (v == nullptr) return missing(key, fallback);
        if (!v->is_number()) {
            fail(std::string("field '") + key + "' must be a number");
            return 0;
        }
        return v->get<float>();
    }
    // A positive number that stays positive and finite as the float32 the file stores (1e-50 would become 0).
    float positive_float(const char* key, float fallback) {
        const json* v = find(key);
        const float f = number(key, fallback);
        if (v != nullptr && v->is_number() && !(std::isfinite(f) && f > 0.0f))
            fail(std::string("field '") + key + "' must be a positive number that float32 can hold (got " + v->dump() + ")");
        return f;
    }
    bool boolean(const char* key, bool fallback) {
        const json* v = find(key);
        if (v == nullptr) return fallback;
        if (!v->is_boolean()) {
            fail(std::string("field '") + key + "' must be true or false");
            return fallback;
        }
        return v->get<bool>();
    }
    // An optional token id: an integer, or a list whose first entry is used; one outside the vocabulary is an
    // error (narrowing 2^40 to int32 would quietly make it 0).
    int32_t token_id(const char* key, uint32_t vocab_size) {
        const json* v = find(key);
        if (v == nullptr) return -1;
        if (v->is_array() && !v->empty()) v = &(*v)[0];
        if (!v->is_number_integer()) return -1;
        if (v->is_number_unsigned() ? v->get<uint64_t>() >= vocab_size : (v->get<int64_t>() < 0 || v->get<int64_t>() >= int64_t(vocab_size))) {
            fail(std::string("field '") + key + "' is " + v->dump() + ", not a token id below vocab_size " + std::to_string(vocab_size));
            return -1;
        }
        return v->get<int32_t>();
    }
    const json* find(const char* key) const {
        auto it = j_.find(key);
        return (it == j_.end() || it->is_null()) ? nullptr : &*it;
    }
    void fail(const std::string& why) {
        if (status_) status_ = error("config.json: " + why);
    }

private:
    template <typename T>
    T missing(const char* key, std::optional<T> fallback) {
        if (fallback) return *fallback;
        fail(std::string("missing field '") + key + "'");
        return T{};
    }
    const json& j_;
    Status status_;
};

// The Hugging Face checkpoint's name of a tensor of the schema.
std::string hf_source_name(Family fam, const schema::TensorSpec& spec) {
    using schema::Role;
    const bool mixtral = fam == Family::Mixtral;
    const std::string layer = "model.layers." + std::to_string(spec.layer) + ".";
    const std::string attn = layer + "self_attn.", moe = layer + (mixtral ? "block_sparse_moe." : "mlp.");
    const std::string expert = moe + "experts." + std::to_string(spec.expert) + ".";
    switch (spec.role) {
        case Role::Embed: return "model.embed_tokens.weight";
        case Role::OutputNorm: return "model.norm.weight";
        case Role::LmHead: return "lm_head.weight";
        case Role::AttnNorm: return layer + "input_layernorm.weight";
        case Role::FfnNorm: return layer + "post_attention_layernorm.weight";
        case Role::Q: return attn + "q_proj.weight";
        case Role::K: return attn + "k_proj.weight";
        case Role::V: return attn + "v_proj.weight";
        case Role::O: return attn + "o_proj.weight";
        case Role::QBias: return attn + "q_proj.bias";
        case Role::KBias: return attn + "k_proj.bias";
        case Role::VBias: return attn + "v_proj.bias";
        case Role::QNorm: return attn + "q_norm.weight";
        case Role::KNorm: return attn + "k_norm.weight";
        case Role::Router: return moe + "gate.weight";
        case Role::SharedExpertGate: return moe + "shared_expert_gate.weight";
        case Role::ExpertGate: return expert + (mixtral ? "w1.weight" : "gate_proj.weight");
        case Role::ExpertUp: return expert + (mixtral ? "w3.weight" : "up_proj.weight");
        case Role::ExpertDown: return expert + (mixtral ? "w2.weight" : "down_proj.weight");
        case Role::SharedGate: return moe + "shared_expert.gate_proj.weight";
        case Role::SharedUp: return moe + "shared_expert.up_proj.weight";
        case Role::SharedDown: return moe + "shared_expert.down_proj.weight";
        case Role::DenseGate: return layer + "mlp.gate_proj.weight";
        case Role::DenseUp: return layer + "mlp.up_proj.weight";
        case Role::DenseDown: return layer + "mlp.down_proj.weight";
    }
    return {};
}

}  // namespace

Result<Plan> plan_model(const json& cfg_json, const std::vector<int32_t>& gen_eos, WeightType type) {
    Config cfg(cfg_json);
    Plan plan;
    const json* mt = cfg.find("model_type");
    if (mt == nullptr || !mt->is_string()) return error("config.json: missing field 'model_type'");
    if (!family_from_name(mt->get<std::string>(), &plan.family))
        return error("config.json: unsupported model_type '" + mt->get<std::string>() + "' (" + schema::family_names() + ")");
    const Family fam = plan.family;
    HyperParams& hp = plan.hp;
    hp.hidden_size = cfg.u32("hidden_size");
    hp.n_layers = cfg.u32("num_hidden_layers");
    hp.n_heads = cfg.u32("num_attention_heads");
    hp.n_kv_heads = cfg.u32("num_key_value_heads", hp.n_heads);
    hp.vocab_size = cfg.u32("vocab_size");
    hp.max_position = cfg.u32("max_position_embeddings", 4096);
    hp.rms_eps = cfg.positive_float("rms_norm_eps", 1e-6f);
    hp.rope_theta = cfg.positive_float("rope_theta", 10000.0f);
    hp.n_experts_active = cfg.u32("num_experts_per_tok");
    hp.n_experts = cfg.u32(fam == Family::Mixtral ? "num_local_experts" : "num_experts");
    if (!cfg.status()) return cfg.status();
    // Counts that size the plan itself: bounded so that a hostile config cannot make planning run away.
    if (hp.n_layers > 4096) return error("config.json: num_hidden_layers " + std::to_string(hp.n_layers) + " exceeds 4096");
    if (hp.n_experts > 4096) return error("config.json: " + std::to_string(hp.n_experts) + " experts exceed 4096");
    if (hp.n_heads > 65536 || hp.n_kv_heads > 65536) return error("config.json: head counts exceed 65536");
    // Every expert is a planned section of three tensors: the plan itself must stay small.
    if (uint64_t(hp.n_layers) * hp.n_experts > (uint64_t(1) << 18))
        return error("config.json: " + std::to_string(hp.n_layers) + " layers x " + std::to_string(hp.n_experts) +
                     " experts exceed 262144 experts in all");
    hp.head_dim = cfg.find("head_dim") ? cfg.u32("head_dim") : (hp.n_heads ? hp.hidden_size / hp.n_heads : 0);
    if (hp.head_dim * hp.n_heads != hp.hidden_size && !cfg.find("head_dim"))
        return error("config.json: hidden_size is not a multiple of num_attention_heads");
    if (hp.head_dim % 2 != 0)  // RoPE rotates pairs; the loader refuses anything else
        return error("config.json: the head size " + std::to_string(hp.head_dim) + " is odd (RoPE needs an even head_dim)");
    if (hp.n_kv_heads == 0 || hp.n_heads % hp.n_kv_heads != 0)
        return error("config.json: num_attention_heads must be a multiple of num_key_value_heads");
    if (hp.n_experts_active > hp.n_experts) return error("config.json: num_experts_per_tok exceeds the number of experts");
    if (cfg.find("rope_scaling")) return error("config.json: rope_scaling is not supported yet");
    if (const json* sw = cfg.find("sliding_window"); sw && cfg.boolean("use_sliding_window", fam == Family::Mixtral)) {
        if (!sw->is_number_integer() || (sw->is_number_integer() && !sw->is_number_unsigned()) || sw->get<uint64_t>() == 0)
            return error("config.json: field 'sliding_window' must be a positive integer or null");
        // With a context no longer than the window, full attention equals sliding-window attention (a window of
        // 2^32 or more limits nothing).
        hp.max_position = static_cast<uint32_t>(std::min<uint64_t>(hp.max_position, sw->get<uint64_t>()));
    }
    if (cfg.boolean("tie_word_embeddings", false)) hp.flags |= kTiedEmbeddings;
    hp.bos_id = cfg.token_id("bos_token_id", hp.vocab_size);
    hp.eos_id = cfg.token_id("eos_token_id", hp.vocab_size);
    if (!gen_eos.empty()) {
        if (gen_eos[0] < 0 || static_cast<uint64_t>(gen_eos[0]) >= hp.vocab_size)
            return error("generation_config.json: eos_token_id " + std::to_string(gen_eos[0]) + " is not a token id below vocab_size " +
                         std::to_string(hp.vocab_size));
        hp.eos_id = gen_eos[0];
    }

    std::vector<bool> moe_layer(hp.n_layers, true);
    if (fam == Family::Mixtral) {
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kNormTopkProb;  // Mixtral always renormalises its top-k weights
    } else if (fam == Family::Qwen2Moe) {
        hp.expert_ffn = cfg.u32("moe_intermediate_size");
        hp.shared_expert_ffn = cfg.find("shared_expert_intermediate_size") ? cfg.u32("shared_expert_intermediate_size") : 0;
        if (hp.shared_expert_ffn) hp.flags |= kSharedExpert;
        hp.flags |= kQkvBias;
        if (cfg.boolean("norm_topk_prob", false)) hp.flags |= kNormTopkProb;
        const uint32_t step = cfg.u32("decoder_sparse_step", 1);
        std::vector<uint32_t> mlp_only;
        if (const json* m = cfg.find("mlp_only_layers")) {
            if (!m->is_array()) return error("config.json: field 'mlp_only_layers' must be a list");
            for (const json& v : *m) {
                if (!v.is_number_unsigned() || v.get<uint64_t>() >= hp.n_layers)
                    return error("config.json: mlp_only_layers has an entry out of range");
                mlp_only.push_back(v.get<uint32_t>());
            }
        }
        for (uint32_t l = 0; l < hp.n_layers; ++l) {
            const bool listed = std::find(mlp_only.begin(), mlp_only.end(), l) != mlp_only.end();
            moe_layer[l] = !listed && step > 0 && (l + 1) % step == 0;
        }
        if (std::find(moe_layer.begin(), moe_layer.end(), false) != moe_layer.end()) hp.dense_ffn = cfg.u32("intermediate_size");
    } else {  // olmoe
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kQkNorm;
        if (cfg.boolean("norm_topk_prob", false)) hp.flags |= kNormTopkProb;
        if (const json* c = cfg.find("clip_qkv")) {
            if (!c->is_number() || c->get<float>() <= 0) return error("config.json: field 'clip_qkv' must be a positive number or null");
            hp.clip_qkv = c->get<float>();
        }
        if (cfg.boolean("attention_bias", false)) return error("config.json: attention_bias is not supported for olmoe");
    }
    if (!cfg.status()) return cfg.status();

    // The engine's own checks, so that no file is written that would not load.
    if (const auto problems = schema::hyperparam_problems(static_cast<uint32_t>(fam), hp, moe_layer); !problems.empty())
        return error("config.json: " + problems.front());
    // The tensors are the schema's; sections group consecutive tensors of one (kind, layer, expert).
    for (schema::TensorSpec& spec : schema::tensors(fam, hp, moe_layer)) {
        if (plan.sections.empty() || plan.sections.back().kind != spec.section || plan.sections.back().layer != spec.layer ||
            plan.sections.back().expert != spec.expert)
            plan.sections.push_back(PlannedSection{spec.section, spec.layer, spec.expert, {}, {}});
        // Norms, biases and the router stay f32 whatever the weight type (the router: near-ties must not flip).
        const WeightType t = spec.kind == schema::Kind::Matrix ? storage_type(type, spec.cols) : WeightType::F32;
        plan.sections.back().tensors.push_back(PlannedTensor{spec.name, t, spec.n_dims(), spec.rows, spec.cols});
        plan.sources.push_back(hf_source_name(fam, spec));
    }
    return plan;
}

namespace {

// Quantises a tensor row by row. The scale searches cost tens of nanoseconds per value, so rows are spread over
// all cores; each row's bytes depend on that row alone, so the output is the same for any thread count. On
// failure the lowest failing row is reported.
Status quantize_tensor(const SourceTensor& src, const PlannedTensor& dst, std::vector<uint8_t>& out) {
    const uint64_t row_bytes = kernels::row_bytes(dst.type, dst.cols);
    out.resize(dst.rows * row_bytes);
    std::mutex failure_lock;
    uint64_t failed_row = dst.rows;
    Status failure;
    ThreadPool pool(0);
    pool.parallel_for(dst.rows, 1, [&](size_t begin, size_t end) {
        std::vector<float> row(dst.cols);
        for (uint64_t r = begin; r < end; ++r) {
            for (uint64_t c = 0; c < dst.cols; ++c) row[c] = source_element(src, r * dst.cols + c);
            if (Status s = quantize_row(dst.type, row.data(), dst.cols, out.data() + r * row_bytes); !s) {
                std::lock_guard lock(failure_lock);
                if (r < failed_row) {
                    failed_row = r;
                    failure = error("tensor " + src.name + " row " + std::to_string(r) + ": " + s.message());
                }
                return;
            }
        }
    });
    return failure;
}

// Converts one source tensor into the planned type. Fails on values the type cannot quantise (NaN, Inf, too large).
Status encode_tensor(const SourceTensor& src, const PlannedTensor& dst, std::vector<uint8_t>& out) {
    const uint64_t n = src.elements();
    switch (dst.type) {
        case WeightType::F32:
            out.resize(n * 4);
            if (src.dtype == SourceDType::F32 && src.row_order.empty()) {
                std::memcpy(out.data(), src.data, n * 4);
            } else {
                for (uint64_t i = 0; i < n; ++i) {
                    const float f = source_element(src, i);
                    std::memcpy(out.data() + i * 4, &f, 4);
                }
            }
            break;
        case WeightType::F16:
        case WeightType::BF16: {
            out.resize(n * 2);
            const bool half = dst.type == WeightType::F16;
            for (uint64_t i = 0; i < n; ++i) {
                const float f = source_element(src, i);
                const uint16_t h = half ? kernels::f32_to_f16(f) : kernels::f32_to_bf16(f);
                std::memcpy(out.data() + i * 2, &h, 2);
            }
            break;
        }
        default:
            if (weight_type_info(dst.type).block_values > 1) return quantize_tensor(src, dst, out);
            return error(std::string("weight type ") + weight_type_name(dst.type) + " cannot be written by the converter");
    }
    return Status::ok();
}

std::string chat_template_from_config(const json& tc) {
    auto it = tc.find("chat_template");
    if (it == tc.end()) return {};
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array()) {  // [{"name": "default", "template": ...}, ...]
        for (const json& t : *it)
            if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
                return t["template"].get<std::string>();
    }
    return {};
}

}  // namespace

Result<Plan> plan_from_config_text(std::string_view config_json, std::string_view generation_config_json, WeightType type) {
    auto cfg = parse_json_file(config_json, "config.json");
    if (!cfg) return cfg.status();
    std::vector<int32_t> gen_eos;
    if (generation_config_json.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        auto g = parse_json_file(generation_config_json, "generation_config.json");
        if (!g) return g.status();
        if (g->contains("eos_token_id")) {
            const json& e = (*g)["eos_token_id"];
            // Out of int32's range stays visible (as -1, refused by the plan) instead of wrapping to a valid-looking id.
            auto id = [](const json& v) { return v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX ? v.get<int32_t>() : -1; };
            if (e.is_number_integer() && !(e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(INT64_MAX))) gen_eos.push_back(id(e));
            if (e.is_array())
                for (const json& v : e)
                    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) gen_eos.push_back(id(v));
        }
    }
    return plan_model(cfg.value(), gen_eos, type);
}

Result<ConvertSummary> convert_hf(const std::string& hf_dir, const std::string& out_path, const ConvertOptions& options) {
    if (!format::weight_type_is_known(static_cast<uint32_t>(options.type)) || !weight_type_info(options.type).quantisable)
        return error(std::string("weight type ") + weight_type_name(options.type) + " is not supported by this converter yet");
    std::error_code ec;
    if (!fs::is_directory(hf_dir, ec)) return error(hf_dir + ": not a directory");
    const fs::path cfg_path = fs::path(hf_dir) / "config.json";
    std::error_code ec2;
    if (!fs::exists(cfg_path, ec2)) return error(hf_dir + ": no config.json");
    auto cfg_text = read_text(cfg_path);
    if (!cfg_text) return cfg_text.status();
    auto gen_text = read_optional(fs::path(hf_dir) / "generation_config.json");
    if (!gen_text) return gen_text.status();
    auto planned = plan_from_config_text(cfg_text.value(), gen_text.value().value_or(std::string()), options.type);
    if (!planned) return error(hf_dir + "/" + planned.message());
    Plan plan = std::move(planned.value());

    // Tokenizer and chat template travel inside the .bin.
    ConvertSummary summary;
    summary.family = plan.family;
    auto tok_file = read_optional(fs::path(hf_dir) / "tokenizer.json");
    if (!tok_file) return tok_file.status();
    if (const std::optional<std::string>& tok = tok_file.value()) {
        std::string config_text;
        auto tc_file = read_optional(fs::path(hf_dir) / "tokenizer_config.json");
        if (!tc_file) return tc_file.status();
        if (tc_file.value()) config_text = *tc_file.value();
        auto parsed = Tokenizer::from_json(tok.value(), config_text);
        if (!parsed) return error(hf_dir + "/tokenizer.json: " + parsed.message());
        if (parsed->vocab_size() > static_cast<int32_t>(plan.hp.vocab_size))
            return error(hf_dir + "/tokenizer.json: " + std::to_string(parsed->vocab_size()) +
                         " tokens do not fit the model's vocabulary of " + std::to_string(plan.hp.vocab_size));
        plan.sections.insert(plan.sections.begin(), PlannedSection{SectionKind::TokenizerJson, kNone, kNone, {}, tok.value()});
        summary.has_tokenizer = true;
        if (!config_text.empty()) {
            auto tc_parsed = parse_json_file(config_text, hf_dir + "/tokenizer_config.json");
            if (!tc_parsed) return tc_parsed.status();
            const json& tc = tc_parsed.value();
            plan.sections.insert(plan.sections.begin() + 1, PlannedSection{SectionKind::TokenizerConfig, kNone, kNone, {}, config_text});
            const std::string tmpl = chat_template_from_config(tc);
            if (!tmpl.empty()) {
                plan.sections.insert(plan.sections.begin() + 2, PlannedSection{SectionKind::ChatTemplate, kNone, kNone, {}, tmpl});
                summary.has_chat_template = true;
            }
        }
    }

    auto set = SafetensorsSet::open_dir(hf_dir);
    if (!set) return set.status();
    return write_plan(plan, [&set](const std::string& name) { return set->find(name); }, hf_dir, out_path, options, summary);
}

Result<ConvertSummary> write_plan(const Plan& plan, const std::function<const SourceTensor*(const std::string&)>& find,
                                  const std::string& source_label, const std::string& out_path,
                                  const ConvertOptions& options, ConvertSummary summary,
                                  const std::function<Status(const std::string&)>& load) {
    // Check every source tensor before writing anything.
    {
        size_t i = 0;
        for (const PlannedSection& s : plan.sections) {
            for (const PlannedTensor& t : s.tensors) {
                const std::string& src_name = plan.sources[i++];
                const SourceTensor* src = find(src_name);
                if (src == nullptr) return error(source_label + ": tensor " + src_name + " is missing from the checkpoint");
                const bool ok = t.n_dims == 1 ? (src->shape.size() == 1 && src->shape[0] == t.rows)
                                              : (src->shape.size() == 2 && src->shape[0] == t.rows && src->shape[1] == t.cols);
                if (!ok) {
                    std::string got;
                    for (uint64_t d : src->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
                    return error(source_label + ": tensor " + src_name + " has shape [" + got + "], config.json implies [" +
                                 std::to_string(t.rows) + (t.n_dims == 2 ? ", " + std::to_string(t.cols) : "") + "]");
                }
            }
        }
    }

    auto writer = BinWriter::create(out_path, plan.family, plan.hp, plan.sections);
    if (!writer) return writer.status();
    const uint64_t total = writer.value()->planned_file_size();
    std::vector<uint8_t> buffer;
    uint64_t done = 0;
    for (size_t i = 0; i < plan.sources.size(); ++i) {
        const PlannedTensor* t = writer.value()->next_tensor();
        if (load) COLIBRI_TRY(load(plan.sources[i]));
        const SourceTensor* src = find(plan.sources[i]);
        COLIBRI_TRY(encode_tensor(*src, *t, buffer));
        release_source_pages(*src);  // keeps peak memory near one tensor, not the whole checkpoint
        COLIBRI_TRY(writer.value()->write_tensor(buffer.data(), buffer.size()));
        done += buffer.size();
        if (options.progress && !options.progress(done, total)) return error("conversion cancelled");
    }
    COLIBRI_TRY(writer.value()->finish());
    summary.file_size = total;
    summary.tensors = static_cast<uint32_t>(plan.sources.size());
    return summary;
}

}  // namespace colibri::tools
