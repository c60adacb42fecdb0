#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "convert.h"
#include "convert_plan.h"
#include "engine/file/bin_writer.h"
#include "engine/base/json_depth.h"
#include "engine/file/mapped_file.h"
#include "engine/file/model_file.h"
#include "engine/core/generation_defaults.h"
#include "engine/core/router.h"
#include "engine/file/schema.h"
#include "engine/core/thread_pool.h"
#include "engine/text/tokenizer.h"
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
Result<std::string> read_text(const fs::path& p, uint64_t max_bytes = uint64_t(1) << 30) { return read_small_file(p.string(), max_bytes); }

// An optional file: empty when absent, an error when present but unreadable (so it is not silently dropped).
Result<std::optional<std::string>> read_optional(const fs::path& p, uint64_t max_bytes = uint64_t(1) << 30) {
    std::error_code ec;
    if (!fs::exists(p, ec) && !fs::is_symlink(p, ec)) return std::optional<std::string>();
    auto text = read_text(p, max_bytes);
    if (!text) return text.status();
    return std::optional<std::string>(std::move(text.value()));
}

// Parses a JSON file of the model directory; one nested past kMaxJsonDepth or holding a NUL byte (which would end
// the parse there, silently) is refused before parsing.
Result<json> parse_json_file(std::string_view text, const std::string& name) {
    if (const std::string why = json_text_problem(text); !why.empty()) return error(name + ": " + why);
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
        const double d = v->get<double>();
        if (!(std::fabs(d) <= std::numeric_limits<float>::max())) {  // narrowing it would be undefined, or inf
            fail(std::string("field '") + key + "' is " + v->dump() + ", out of float32's range");
            return 0;
        }
        return static_cast<float>(d);
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

// Qwen3-Next's and Qwen3.5's names. Their RMSNorms are zero-centred (x̂·(1 + w)): '#plus1' stores 1 + w; '#negexp'
// stores A = −exp(A_log). Qwen3-Next fuses q, k, v, z (and b, a) grouped per key head, and each head's query with its
// output gate: '#qkv', '#z', '#b', '#a', '#q', '#q_gate' pick the rows (derive_source). Qwen3.5's checkpoint lives
// under model.language_model. with its experts fused ('#fgate', '#fup', '#fdown'); its value heads are stored tiled
// as llama.cpp stores them (kLinearValueTiled: '#t...' reorder the value heads' rows, channels and columns).
std::string hybrid_source_name(Family fam, const HyperParams& hp, const schema::TensorSpec& spec) {
    using schema::Role;
    const bool next = fam == Family::Qwen3Next;
    const std::string model = next ? "model." : "model.language_model.";
    // The MTP head is mtp.*: its layers mtp.layers.{k}, with fc and three norms of its own (zero-centred, as the model's).
    const bool mtp = spec.layer != kNone && spec.layer >= hp.n_layers;
    const std::string layer = mtp ? "mtp.layers." + std::to_string(spec.layer - hp.n_layers) + "."
                                  : model + "layers." + std::to_string(spec.layer) + ".";
    const std::string attn = layer + "self_attn.", lin = layer + "linear_attn.", moe = layer + "mlp.";
    const std::string e = std::to_string(spec.expert);
    switch (spec.role) {
        case Role::Embed: return model + "embed_tokens.weight";
        case Role::OutputNorm: return model + "norm.weight#plus1";
        case Role::LmHead: return "lm_head.weight";
        case Role::AttnNorm: return layer + "input_layernorm.weight#plus1";
        case Role::FfnNorm: return layer + "post_attention_layernorm.weight#plus1";
        case Role::Q: return attn + "q_proj.weight#q";
        case Role::QGate: return attn + "q_proj.weight#q_gate";
        case Role::K: return attn + "k_proj.weight";
        case Role::V: return attn + "v_proj.weight";
        case Role::O:
            if (spec.name.find(".linear.") == std::string::npos) return attn + "o_proj.weight";
            return lin + (next ? "out_proj.weight" : "out_proj.weight#tcols");
        case Role::QBias: return attn + "q_proj.bias";
        case Role::KBias: return attn + "k_proj.bias";
        case Role::VBias: return attn + "v_proj.bias";
        case Role::OBias: return attn + "o_proj.bias";
        case Role::QNorm: return attn + "q_norm.weight#plus1";
        case Role::KNorm: return attn + "k_norm.weight#plus1";
        case Role::LinQkv: return next ? lin + "in_proj_qkvz.weight#qkv" : lin + "in_proj_qkv.weight#tqkv";
        case Role::LinZ: return next ? lin + "in_proj_qkvz.weight#z" : lin + "in_proj_z.weight#trows";
        case Role::LinBeta: return next ? lin + "in_proj_ba.weight#b" : lin + "in_proj_b.weight#theads";
        case Role::LinAlpha: return next ? lin + "in_proj_ba.weight#a" : lin + "in_proj_a.weight#theads";
        case Role::LinConv: return lin + (next ? "conv1d.weight#conv" : "conv1d.weight#tconv");
        case Role::LinDtBias: return lin + (next ? "dt_bias" : "dt_bias#theads");
        case Role::LinSsmA: return lin + (next ? "A_log#negexp" : "A_log#tnegexp");
        case Role::LinNorm: return lin + "norm.weight";
        case Role::Router: return moe + "gate.weight";
        case Role::SharedExpertGate: return moe + "shared_expert_gate.weight";
        case Role::ExpertGate: return next ? moe + "experts." + e + ".gate_proj.weight" : moe + "experts.gate_up_proj#fgate:" + e;
        case Role::ExpertUp: return next ? moe + "experts." + e + ".up_proj.weight" : moe + "experts.gate_up_proj#fup:" + e;
        case Role::ExpertDown: return next ? moe + "experts." + e + ".down_proj.weight" : moe + "experts.down_proj#fdown:" + e;
        case Role::SharedGate: return moe + "shared_expert.gate_proj.weight";
        case Role::SharedUp: return moe + "shared_expert.up_proj.weight";
        case Role::SharedDown: return moe + "shared_expert.down_proj.weight";
        case Role::DenseGate: return moe + "gate_proj.weight";
        case Role::DenseUp: return moe + "up_proj.weight";
        case Role::DenseDown: return moe + "down_proj.weight";
        case Role::MtpEnorm: return "mtp.pre_fc_norm_embedding.weight#plus1";
        case Role::MtpHnorm: return "mtp.pre_fc_norm_hidden.weight#plus1";
        case Role::MtpEhProj: return "mtp.fc.weight";
        case Role::MtpNorm: return "mtp.norm.weight#plus1";
        default: return {};
    }
}

// The Hugging Face checkpoint's name of a tensor of the schema. A name with '#' is a view of another tensor
// (derive_source below): gpt_oss keeps its experts stacked, DeepSeek's kv_b holds k_b and v_b.
std::string hf_source_name(Family fam, const HyperParams& hp, const schema::TensorSpec& spec) {
    using schema::Role;
    if (fam == Family::Qwen3Next || fam == Family::Qwen35Moe) return hybrid_source_name(fam, hp, spec);
    const bool gpt_oss = fam == Family::GptOss, minimax = fam == Family::MinimaxM2;
    const bool mixtral_style = fam == Family::Mixtral || minimax;  // block_sparse_moe, experts' w1/w3/w2
    const bool deepseek_style = fam == Family::DeepseekV3 || fam == Family::Glm4Moe || fam == Family::Glm4MoeLite;  // shared_experts
    const std::string layer = "model.layers." + std::to_string(spec.layer) + ".";
    const std::string attn = layer + "self_attn.", moe = layer + (mixtral_style ? "block_sparse_moe." : "mlp.");
    const std::string e = std::to_string(spec.expert);
    const std::string expert = moe + "experts." + e + ".";
    const std::string shared = moe + (deepseek_style ? "shared_experts." : "shared_expert.");
    switch (spec.role) {
        case Role::Embed: return "model.embed_tokens.weight";
        case Role::OutputNorm: return "model.norm.weight";
        case Role::LmHead: return "lm_head.weight";
        case Role::AttnNorm: return layer + "input_layernorm.weight";
        case Role::FfnNorm: return layer + "post_attention_layernorm.weight";
        case Role::Q:
            if (hp.kv_lora_rank && hp.q_lora_rank) return attn + "q_b_proj.weight";
            return attn + "q_proj.weight";
        case Role::K: return attn + "k_proj.weight";
        case Role::V: return attn + "v_proj.weight";
        case Role::O: return attn + "o_proj.weight";
        case Role::QBias: return attn + "q_proj.bias";
        case Role::KBias: return attn + "k_proj.bias";
        case Role::VBias: return attn + "v_proj.bias";
        case Role::OBias: return attn + "o_proj.bias";
        case Role::QNorm: return attn + "q_norm.weight";
        case Role::KNorm: return attn + "k_norm.weight";
        case Role::Sinks: return attn + "sinks";
        case Role::QA: return attn + "q_a_proj.weight";
        case Role::QANorm: return attn + "q_a_layernorm.weight";
        case Role::KvA: return attn + "kv_a_proj_with_mqa.weight";
        case Role::KvANorm: return attn + "kv_a_layernorm.weight";
        case Role::KB: return attn + "kv_b_proj.weight#k_b";
        case Role::VB: return attn + "kv_b_proj.weight#v_b";
        case Role::Router: return moe + (gpt_oss ? "router.weight" : "gate.weight");
        case Role::RouterBias: return moe + "router.bias";
        case Role::SelectionBias: return moe + (minimax ? "e_score_correction_bias" : "gate.e_score_correction_bias");
        case Role::SharedExpertGate: return moe + "shared_expert_gate.weight";
        case Role::ExpertGate:
            if (gpt_oss) return moe + "experts.gate_up_proj#gate:" + e;
            return expert + (mixtral_style ? "w1.weight" : "gate_proj.weight");
        case Role::ExpertUp:
            if (gpt_oss) return moe + "experts.gate_up_proj#up:" + e;
            return expert + (mixtral_style ? "w3.weight" : "up_proj.weight");
        case Role::ExpertDown:
            if (gpt_oss) return moe + "experts.down_proj#down:" + e;
            return expert + (mixtral_style ? "w2.weight" : "down_proj.weight");
        case Role::ExpertGateBias: return moe + "experts.gate_up_proj_bias#gate_bias:" + e;
        case Role::ExpertUpBias: return moe + "experts.gate_up_proj_bias#up_bias:" + e;
        case Role::ExpertDownBias: return moe + "experts.down_proj_bias#row:" + e;
        case Role::SharedGate: return shared + "gate_proj.weight";
        case Role::SharedUp: return shared + "up_proj.weight";
        case Role::SharedDown: return shared + "down_proj.weight";
        case Role::DenseGate: return layer + "mlp.gate_proj.weight";
        case Role::DenseUp: return layer + "mlp.up_proj.weight";
        case Role::DenseDown: return layer + "mlp.down_proj.weight";
        // DeepSeek-V3 / GLM's MTP layer model.layers.{n_layers + k}: its own norms and projection; its embed_tokens and
        // shared_head.head are the model's (DeepSeek-V3 report, 2.2: shared), so they are not stored again.
        case Role::MtpEnorm: return layer + "enorm.weight";
        case Role::MtpHnorm: return layer + "hnorm.weight";
        case Role::MtpEhProj: return layer + "eh_proj.weight";
        case Role::MtpNorm: return layer + "shared_head.norm.weight";
        case Role::QGate: case Role::LinQkv: case Role::LinZ: case Role::LinBeta: case Role::LinAlpha: case Role::LinConv:
        case Role::LinDtBias: case Role::LinSsmA: case Role::LinNorm: break;  // the hybrids' (hybrid_source_name)
    }
    return {};
}

// RoPE settings in either spelling: transformers 5's rope_parameters, or the hub's rope_theta + rope_scaling
// (with partial_rotary_factor at the top level or inside). Only the default and YaRN are implemented.
Status read_rope(Config& cfg, const json& raw, HyperParams& hp, double* partial_rotary) {
    const json* params = cfg.find("rope_parameters");
    const json* scaling = cfg.find("rope_scaling");
    if (params && !params->is_object()) return error("config.json: field 'rope_parameters' must be an object");
    if (scaling && !scaling->is_object()) return error("config.json: field 'rope_scaling' must be an object or null");
    // A per-layer-type rope_parameters ({"full_attention": {...}, ...}) is not one of these families' spellings.
    json p = params ? *params : (scaling ? *scaling : json::object());
    auto number = [&](const char* key, double fallback) -> Result<double> {
        auto it = p.find(key);
        if (it == p.end() || it->is_null()) return fallback;
        if (!it->is_number()) return error(std::string("config.json: rope parameter '") + key + "' must be a number");
        const double d = it->get<double>();
        if (!(std::fabs(d) <= std::numeric_limits<float>::max()))  // stored as float32
            return error(std::string("config.json: rope parameter '") + key + "' is " + it->dump() + ", out of float32's range");
        return d;
    };
    auto theta = number("rope_theta", cfg.number("rope_theta", 10000.0f));
    if (!theta) return theta.status();
    hp.rope_theta = static_cast<float>(theta.value());
    std::string type = "default";
    for (const char* key : {"rope_type", "type"})
        if (auto it = p.find(key); it != p.end() && it->is_string()) {
            type = it->get<std::string>();
            break;
        }
    *partial_rotary = 1.0;
    if (const json* f = cfg.find("partial_rotary_factor")) {
        if (!f->is_number()) return error("config.json: field 'partial_rotary_factor' must be a number");
        *partial_rotary = f->get<double>();
    }
    auto partial = number("partial_rotary_factor", *partial_rotary);
    if (!partial) return partial.status();
    *partial_rotary = partial.value();
    if (type == "default") return Status::ok();
    if (type != "yarn") return error("config.json: rope type '" + type + "' is not supported (default, yarn)");
    hp.rope_scaling = static_cast<uint8_t>(RopeScaling::Yarn);
    if (p.contains("attention_factor") && !p["attention_factor"].is_null())
        return error("config.json: an explicit YaRN attention_factor is not supported");
    auto factor = number("factor", 0.0);
    auto orig = number("original_max_position_embeddings", cfg.find("original_max_position_embeddings")
                                                                ? cfg.number("original_max_position_embeddings")
                                                                : hp.max_position);
    auto fast = number("beta_fast", 32.0), slow = number("beta_slow", 1.0);
    auto mscale = number("mscale", 0.0), mscale_all = number("mscale_all_dim", 0.0);
    for (const auto* r : {&factor, &orig, &fast, &slow, &mscale, &mscale_all})
        if (!*r) return r->status();
    if (!(factor.value() >= 1.0) || !(orig.value() >= 1.0) || orig.value() > 4294967295.0)
        return error("config.json: YaRN needs a factor >= 1 and original_max_position_embeddings");
    hp.rope_factor = static_cast<float>(factor.value());
    hp.rope_original_max_position = static_cast<uint32_t>(orig.value());
    hp.yarn_beta_fast = static_cast<float>(fast.value());
    hp.yarn_beta_slow = static_cast<float>(slow.value());
    hp.yarn_mscale = static_cast<float>(mscale.value());
    hp.yarn_mscale_all_dim = static_cast<float>(mscale_all.value());
    bool truncate = true;
    if (auto it = p.find("truncate"); it != p.end() && !it->is_null()) {
        if (!it->is_boolean()) return error("config.json: rope parameter 'truncate' must be true or false");
        truncate = it->get<bool>();
    }
    if (truncate) hp.flags |= kYarnTruncate;
    (void)raw;
    return Status::ok();
}

// Layers listed in a config field as integers below n (Qwen's mlp_only_layers).
Result<std::vector<uint32_t>> layer_list(Config& cfg, const char* key, uint32_t n) {
    std::vector<uint32_t> out;
    const json* m = cfg.find(key);
    if (m == nullptr) return out;
    if (!m->is_array()) return error(std::string("config.json: field '") + key + "' must be a list");
    for (const json& v : *m) {
        if (!v.is_number_unsigned() || v.get<uint64_t>() >= n) return error(std::string("config.json: ") + key + " has an entry out of range");
        out.push_back(v.get<uint32_t>());
    }
    return out;
}

// layer_types: which layers are "sliding_attention" (the others "full_attention"); absent, none are.
Status read_layer_types(Config& cfg, uint32_t n_layers, std::vector<bool>& sliding) {
    const json* lt = cfg.find("layer_types");
    if (lt == nullptr) return Status::ok();
    if (!lt->is_array() || lt->size() != n_layers) return error("config.json: field 'layer_types' must list every layer");
    for (uint32_t l = 0; l < n_layers; ++l) {
        const json& v = (*lt)[l];
        if (!v.is_string() || (v != "sliding_attention" && v != "full_attention"))
            return error("config.json: layer_types has an entry other than sliding_attention / full_attention");
        sliding[l] = v == "sliding_attention";
    }
    return Status::ok();
}

// The sliding-window attention of mixtral, qwen2_moe and qwen3_moe as transformers 5.2 applies it: Mixtral's window
// (when not null) limits every layer; qwen3_moe's too, but only with use_sliding_window (it never reads
// max_window_layers); qwen2_moe's, with use_sliding_window, limits the layers its layer_types names or else the even
// layers below max_window_layers. A window absent from the config is transformers' default, 4096. The context stays
// max_position_embeddings: a sliding layer attends to the last `window` positions of it. A window as long as the
// context limits nothing and is dropped.
Status read_sliding_window(Config& cfg, const json& raw, Family fam, HyperParams& hp, std::vector<bool>& sliding) {
    const auto sw = raw.find("sliding_window");
    const bool absent = sw == raw.end(), none = !absent && sw->is_null();
    if (fam == Family::Mixtral) {
        if (absent || none) return Status::ok();
        sliding.assign(hp.n_layers, true);
    } else {
        const bool use = cfg.boolean("use_sliding_window", false);
        if (fam == Family::Qwen3Moe) {
            if (!use || none) return Status::ok();  // sliding_window = None: the causal mask of every layer is full
            sliding.assign(hp.n_layers, true);
        } else {
            if (Status st = read_layer_types(cfg, hp.n_layers, sliding); !st) return st;
            if (cfg.find("layer_types") == nullptr && use) {
                uint32_t full_from = 28;  // max_window_layers' default
                if (const json* m = cfg.find("max_window_layers")) {
                    if (!m->is_number_unsigned()) return error("config.json: field 'max_window_layers' must be a non-negative integer");
                    full_from = static_cast<uint32_t>(std::min<uint64_t>(m->get<uint64_t>(), hp.n_layers));
                }
                for (uint32_t l = 0; l < full_from; ++l) sliding[l] = (l + 1) % 2 != 0;  // transformers' rule, as written
            }
            if (std::find(sliding.begin(), sliding.end(), true) == sliding.end()) return Status::ok();
            if (!use) return error("config.json: layer_types names sliding layers but use_sliding_window is false");
        }
        if (none) return error("config.json: use_sliding_window is true but sliding_window is null");
    }
    if (!cfg.status()) return cfg.status();
    const uint64_t window = absent ? 4096 : sw->is_number_unsigned() ? sw->get<uint64_t>() : 0;
    if (window == 0) return error("config.json: field 'sliding_window' must be a positive integer or null");
    if (window >= hp.max_position) {
        sliding.assign(hp.n_layers, false);
        return Status::ok();
    }
    hp.sliding_window = static_cast<uint32_t>(window);
    return Status::ok();
}

// MiniMax-M2's hub config spells its partial RoPE `rotary_dim` (a field of its original remote code), which
// transformers 5.2 does not read: it would rotate whole heads unless rope_parameters carries partial_rotary_factor.
// The checkpoints are trained with rotary_dim, so it decides; a factor that says otherwise is refused.
Status read_minimax_rotary_dim(Config& cfg, HyperParams& hp, double* partial_rotary) {
    if (!cfg.find("rotary_dim")) return Status::ok();
    const uint32_t rotary = cfg.u32("rotary_dim");
    if (!cfg.status()) return cfg.status();
    if (rotary > hp.head_dim || rotary % 2 != 0)
        return error("config.json: rotary_dim " + std::to_string(rotary) + " must be even and at most head_dim " + std::to_string(hp.head_dim));
    if (*partial_rotary != 1.0 && !(*partial_rotary > 0.0 && *partial_rotary < 1.0))
        return error("config.json: partial_rotary_factor must lie in (0, 1]");
    if (*partial_rotary != 1.0 && static_cast<uint32_t>(hp.head_dim * *partial_rotary) != rotary)
        return error("config.json: rotary_dim " + std::to_string(rotary) + " and partial_rotary_factor " + std::to_string(*partial_rotary) +
                     " disagree");
    hp.rotary_dim = rotary == hp.head_dim ? 0 : rotary;
    *partial_rotary = 1.0;
    return Status::ok();
}

// The hub config's remote-code switches of MiniMax-M2. transformers 5.2 reads none of them and always runs full
// softmax attention with whole-projection q/k norms and a biased sigmoid router without a shared expert; a config
// that asks for something else (MiniMax-01's lightning attention, another scoring) is refused rather than run as that.
Status check_minimax_hub_fields(Config& cfg) {
    auto refuse = [](const std::string& what) { return error("config.json: " + what + " is not supported for minimax_m2"); };
    if (!cfg.boolean("use_qk_norm", true)) return refuse("use_qk_norm false");
    if (!cfg.boolean("use_routing_bias", true)) return refuse("use_routing_bias false");
    if (!cfg.status()) return cfg.status();
    if (const json* t = cfg.find("qk_norm_type"); t && *t != "per_layer") return refuse("qk_norm_type " + t->dump());
    if (const json* f = cfg.find("scoring_func"); f && *f != "sigmoid") return refuse("scoring_func " + f->dump());
    if (const json* s = cfg.find("shared_intermediate_size"); s && !(s->is_number_integer() && s->get<int64_t>() == 0))
        return refuse("a shared expert (shared_intermediate_size " + s->dump() + ")");
    if (const json* a = cfg.find("attn_type_list")) {
        if (!a->is_array()) return error("config.json: field 'attn_type_list' must be a list");
        for (const json& v : *a)
            if (v != 1) return refuse("attn_type_list entry " + v.dump() + " (only 1, softmax attention)");
    }
    return Status::ok();
}

// GLM-4.7-Flash's dense and MoE layers: mlp_layer_types ("dense" / "sparse" per layer), by default layer 0 dense and the
// others sparse. transformers 5.2 reads nothing else: the hub's first_k_dense_replace (DeepSeek's spelling) is accepted
// when it names the same layers and refused when it does not (a checkpoint written for it would not load there).
Status read_mlp_layer_types(Config& cfg, uint32_t n_layers, std::vector<bool>& moe_layer) {
    const bool hub_dense = cfg.find("first_k_dense_replace") != nullptr;
    const std::vector<bool> hub = moe_layer;
    moe_layer.assign(n_layers, true);
    if (const json* t = cfg.find("mlp_layer_types")) {
        if (!t->is_array() || t->size() != n_layers) return error("config.json: field 'mlp_layer_types' must list every layer");
        for (uint32_t l = 0; l < n_layers; ++l) {
            const json& v = (*t)[l];
            if (v != "dense" && v != "sparse") return error("config.json: mlp_layer_types has an entry other than dense / sparse");
            moe_layer[l] = v == "sparse";
        }
    } else if (n_layers > 0) {
        moe_layer[0] = false;
    }
    if (hub_dense && hub != moe_layer)
        return error("config.json: first_k_dense_replace disagrees with the dense layers transformers 5.2 uses for glm4_moe_lite "
                     "(mlp_layer_types, by default layer 0 only)");
    return Status::ok();
}

// qwen2_moe's MLP layout, which Qwen3-Next keeps: a layer is MoE when it is not in mlp_only_layers and its 1-based
// index is a multiple of decoder_sparse_step; a step of 0 makes every layer dense (as transformers reads it).
Status read_sparse_step_layers(Config& cfg, uint32_t n_layers, std::vector<bool>& moe_layer) {
    const uint32_t step = cfg.u32("decoder_sparse_step", 1);
    auto mlp_only = layer_list(cfg, "mlp_only_layers", n_layers);
    if (!mlp_only) return mlp_only.status();
    for (uint32_t l = 0; l < n_layers; ++l) {
        const bool listed = std::find(mlp_only->begin(), mlp_only->end(), l) != mlp_only->end();
        moe_layer[l] = !listed && step > 0 && (l + 1) % step == 0;
    }
    return Status::ok();
}

// Qwen3-Next and Qwen3.5-MoE: Gated DeltaNet layers but every full_attention_interval-th (layer_types, when given,
// must say the same), gated attention with per-head q/k norms, a gated shared expert; Qwen3-Next's MLP layout as
// qwen2_moe's (decoder_sparse_step, mlp_only_layers, norm_topk_prob), Qwen3.5's every layer MoE, renormalised.
Status read_gated_deltanet(Config& cfg, Family fam, HyperParams& hp, std::vector<bool>& moe_layer) {
    hp.expert_ffn = cfg.u32("moe_intermediate_size");
    hp.shared_expert_ffn = cfg.find("shared_expert_intermediate_size") ? cfg.u32("shared_expert_intermediate_size") : 0;
    if (hp.shared_expert_ffn) hp.flags |= kSharedExpert;
    hp.flags |= kQkNorm | kQkNormPerHead | kAttentionOutputGate;
    if (fam == Family::Qwen35Moe) hp.flags |= kLinearValueTiled;  // stored in llama.cpp's order (hybrid_source_name)
    if (cfg.boolean("attention_bias", false)) hp.flags |= kQkvBias | kOutputBias;
    if (fam == Family::Qwen35Moe || cfg.boolean("norm_topk_prob", true)) hp.flags |= kNormTopkProb;
    if (fam == Family::Qwen3Next)
        if (Status st = read_sparse_step_layers(cfg, hp.n_layers, moe_layer); !st) return st;
    hp.linear_key_heads = cfg.u32("linear_num_key_heads");
    hp.linear_value_heads = cfg.u32("linear_num_value_heads");
    hp.linear_key_dim = cfg.u32("linear_key_head_dim");
    hp.linear_value_dim = cfg.u32("linear_value_head_dim");
    hp.linear_conv_kernel = cfg.u32("linear_conv_kernel_dim", 4);
    hp.full_attention_interval = cfg.u32("full_attention_interval", 4);
    if (!cfg.status()) return cfg.status();
    if (const json* lt = cfg.find("layer_types")) {
        if (!lt->is_array() || lt->size() != hp.n_layers) return error("config.json: field 'layer_types' must list every layer");
        for (uint32_t l = 0; l < hp.n_layers; ++l) {
            const bool linear = hp.full_attention_interval != 0 && (l + 1) % hp.full_attention_interval != 0;
            if ((*lt)[l] != (linear ? "linear_attention" : "full_attention"))
                return error("config.json: layer_types[" + std::to_string(l) + "] is " + (*lt)[l].dump() +
                             ", not what full_attention_interval " + std::to_string(hp.full_attention_interval) + " says");
        }
    }
    return Status::ok();
}

}  // namespace

// The multi-token-prediction layers: num_nextn_predict_layers (DeepSeek-V3, GLM-4.5, GLM-4.7-Flash; also vLLM's
// spelling for Qwen3-Next) or mtp_num_hidden_layers (Qwen3.5's text_config; convert_hf counts Qwen3-Next's from its
// checkpoint, whose config has neither). Qwen's head has one fc and norm pair, so one layer.
Status read_mtp_layers(Config& cfg, Family fam, HyperParams& hp) {
    const bool qwen = fam == Family::Qwen3Next || fam == Family::Qwen35Moe;
    const char* key = cfg.find("num_nextn_predict_layers") ? "num_nextn_predict_layers" : qwen ? "mtp_num_hidden_layers" : nullptr;
    if (key == nullptr || !cfg.find(key) || !schema::family_has_mtp(uint32_t(fam))) return Status::ok();
    const json& v = *cfg.find(key);
    if (v.is_null()) return Status::ok();
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<uint64_t>() > (qwen ? 1 : schema::kMaxMtpLayers))
        return error(std::string("config.json: field '") + key + "' must be a count from 0 to " + std::to_string(qwen ? 1 : schema::kMaxMtpLayers));
    hp.mtp_layers = v.get<uint32_t>();
    return Status::ok();
}

Result<Plan> plan_model(const json& cfg_json, const std::vector<int32_t>& gen_eos, WeightType type) {
    Config cfg(cfg_json);
    Plan plan;
    const json* mt = cfg.find("model_type");
    if (mt == nullptr || !mt->is_string()) return error("config.json: missing field 'model_type'");
    // Qwen3.5's hub config is the vision-language model's: its text model is text_config (model_type qwen3_5_moe_text).
    if (*mt == "qwen3_5_moe" && cfg.find("text_config")) {
        const json& text = *cfg.find("text_config");
        if (!text.is_object() || !text.contains("model_type") || text["model_type"] != "qwen3_5_moe_text")
            return error("config.json: field 'text_config' must be an object with model_type qwen3_5_moe_text");
        return plan_model(text, gen_eos, type);
    }
    if (*mt == "qwen3_5_moe_text") plan.family = Family::Qwen35Moe;
    // Kimi-K2's hub config names its own model_type for DeepSeek-V3's remote code (DeepseekV3ForCausalLM).
    else if (!family_from_name(*mt == "kimi_k2" ? "deepseek_v3" : mt->get<std::string>(), &plan.family))
        return error("config.json: unsupported model_type '" + mt->get<std::string>() + "' (" + schema::family_names() + ")");
    const Family fam = plan.family;
    const bool deepseek = fam == Family::DeepseekV3, glm4 = fam == Family::Glm4Moe, gpt_oss = fam == Family::GptOss;
    const bool qwen3 = fam == Family::Qwen3Moe, minimax = fam == Family::MinimaxM2, glm4_lite = fam == Family::Glm4MoeLite;
    const bool latent = deepseek || glm4_lite;  // multi-head latent attention
    HyperParams& hp = plan.hp;
    hp.hidden_size = cfg.u32("hidden_size");
    hp.n_layers = cfg.u32("num_hidden_layers");
    hp.n_heads = cfg.u32("num_attention_heads");
    hp.n_kv_heads = cfg.u32("num_key_value_heads", hp.n_heads);
    hp.vocab_size = cfg.u32("vocab_size");
    hp.max_position = cfg.u32("max_position_embeddings", 4096);
    hp.rms_eps = cfg.positive_float("rms_norm_eps", 1e-6f);
    // Experts: each family's own key first, then the other spellings transformers accepts for it.
    const char* const expert_keys[] = {latent || glm4 ? "n_routed_experts" : (fam == Family::Mixtral || gpt_oss || minimax) ? "num_local_experts" : "num_experts",
                                       "num_local_experts", "num_experts"};
    const char* expert_key = expert_keys[0];
    for (const char* k : expert_keys)
        if (cfg.find(k)) {
            expert_key = k;
            break;
        }
    hp.n_experts = cfg.u32(expert_key);
    hp.n_experts_active = cfg.u32(gpt_oss && !cfg.find("num_experts_per_tok") ? "experts_per_token" : "num_experts_per_tok");
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
    if (hp.head_dim * hp.n_heads != hp.hidden_size && !cfg.find("head_dim") && !latent)
        return error("config.json: hidden_size is not a multiple of num_attention_heads");
    if (hp.n_kv_heads == 0 || hp.n_heads % hp.n_kv_heads != 0)
        return error("config.json: num_attention_heads must be a multiple of num_key_value_heads");
    if (hp.n_experts_active > hp.n_experts) return error("config.json: num_experts_per_tok exceeds the number of experts");
    double partial_rotary = 1.0;
    if (Status s = read_rope(cfg, cfg_json, hp, &partial_rotary); !s) return s;
    if (minimax)
        if (Status s = read_minimax_rotary_dim(cfg, hp, &partial_rotary); !s) return s;
    const bool old_family = fam == Family::Mixtral || fam == Family::Qwen2Moe || fam == Family::Olmoe;
    if (old_family && hp.rope_scaling != 0) return error("config.json: rope_scaling is not supported yet for " + mt->get<std::string>());
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
    std::vector<bool> sliding(hp.n_layers, false);
    if (fam == Family::Mixtral) {
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kNormTopkProb;  // Mixtral always renormalises its top-k weights
    } else if (fam == Family::Qwen2Moe || qwen3) {
        hp.expert_ffn = cfg.u32("moe_intermediate_size");
        if (fam == Family::Qwen2Moe) {
            hp.shared_expert_ffn = cfg.find("shared_expert_intermediate_size") ? cfg.u32("shared_expert_intermediate_size") : 0;
            if (hp.shared_expert_ffn) hp.flags |= kSharedExpert;
            hp.flags |= kQkvBias;
        } else {
            hp.flags |= kQkNorm | kQkNormPerHead;  // q_norm / k_norm over head_dim, before RoPE
            if (cfg.boolean("attention_bias", false)) hp.flags |= kQkvBias | kOutputBias;
        }
        if (cfg.boolean("norm_topk_prob", false)) hp.flags |= kNormTopkProb;
        if (Status st = read_sparse_step_layers(cfg, hp.n_layers, moe_layer); !st) return st;
    } else if (fam == Family::Qwen3Next || fam == Family::Qwen35Moe) {
        if (Status st = read_gated_deltanet(cfg, fam, hp, moe_layer); !st) return st;
    } else if (fam == Family::Olmoe) {
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kQkNorm;
        if (cfg.boolean("norm_topk_prob", false)) hp.flags |= kNormTopkProb;
        if (cfg.find("clip_qkv")) {
            hp.clip_qkv = cfg.number("clip_qkv");
            if (cfg.status() && !(hp.clip_qkv > 0.0f)) return error("config.json: field 'clip_qkv' must be a positive number or null");
        }
        if (cfg.boolean("attention_bias", false)) return error("config.json: attention_bias is not supported for olmoe");
    } else if (gpt_oss) {
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kAttentionSinks | kRouterBias | kExpertBias;
        if (cfg.boolean("attention_bias", true)) hp.flags |= kQkvBias | kOutputBias;
        hp.router_scoring = static_cast<uint8_t>(RouterScoring::SoftmaxSelected);
        hp.swiglu_limit = cfg.number("swiglu_limit", 7.0f);
        if (cfg.status() && !(hp.swiglu_limit > 0.0f)) return error("config.json: field 'swiglu_limit' must be positive");
        // layer_types: "sliding_attention" layers attend to the last sliding_window positions.
        if (Status st = read_layer_types(cfg, hp.n_layers, sliding); !st) return st;
        if (std::find(sliding.begin(), sliding.end(), true) != sliding.end()) hp.sliding_window = cfg.u32("sliding_window");
    } else if (minimax) {
        // Sigmoid scores, selection on score + e_score_correction_bias, always renormalised, no scaling factor and no
        // shared expert; q_norm / k_norm over the whole projection (olmoe's), before RoPE.
        hp.expert_ffn = cfg.u32("intermediate_size");
        hp.flags |= kQkNorm | kNormTopkProb | kSelectionBias;
        hp.router_scoring = static_cast<uint8_t>(RouterScoring::Sigmoid);
        if (Status st = check_minimax_hub_fields(cfg); !st) return st;
    } else {  // deepseek_v3, glm4_moe, glm4_moe_lite: sigmoid routing with a selection bias, groups, shared experts, dense first layers
        hp.expert_ffn = cfg.u32("moe_intermediate_size");
        const uint32_t shared = cfg.find("n_shared_experts") ? cfg.u32("n_shared_experts") : 0;
        if (shared) {
            if (uint64_t(shared) * hp.expert_ffn > UINT32_MAX) return error("config.json: n_shared_experts x moe_intermediate_size exceeds 2^32");
            hp.shared_expert_ffn = shared * hp.expert_ffn;
            hp.flags |= kSharedExpert | kSharedExpertUngated;
        }
        if (cfg.boolean("norm_topk_prob", latent)) hp.flags |= kNormTopkProb;
        const float scaling = cfg.number("routed_scaling_factor", 1.0f);
        if (cfg.status() && !(scaling > 0.0f)) return error("config.json: field 'routed_scaling_factor' must be positive");
        hp.routed_scaling = scaling;
        const uint32_t n_group = cfg.u32("n_group", 1), topk_group = cfg.u32("topk_group", 1);
        if (n_group > 255 || topk_group > n_group) return error("config.json: n_group / topk_group out of range");
        hp.n_group = static_cast<uint8_t>(n_group);
        hp.topk_group = static_cast<uint8_t>(topk_group);
        // transformers' DeepseekV3 and Glm4Moe routers are sigmoid with the correction bias whatever
        // scoring_func/topk_method say; a config asking for something else is not one they run.
        if (const json* sf = cfg.find("scoring_func"); sf && *sf != "sigmoid")
            return error("config.json: scoring_func '" + sf->dump() + "' is not supported for " + mt->get<std::string>() + " (sigmoid)");
        hp.router_scoring = static_cast<uint8_t>(RouterScoring::Sigmoid);
        hp.flags |= kSelectionBias;
        uint32_t first_dense = 0;
        if (const json* f = cfg.find("first_k_dense_replace")) {
            if (!f->is_number_unsigned() || f->get<uint64_t>() > hp.n_layers) return error("config.json: field 'first_k_dense_replace' out of range");
            first_dense = f->get<uint32_t>();
        }
        for (uint32_t l = 0; l < first_dense; ++l) moe_layer[l] = false;
        if (glm4_lite)
            if (Status st = read_mlp_layer_types(cfg, hp.n_layers, moe_layer); !st) return st;
        if (latent) {
            hp.kv_lora_rank = cfg.u32("kv_lora_rank");
            hp.q_lora_rank = cfg.find("q_lora_rank") ? cfg.u32("q_lora_rank") : 0;
            const uint32_t nope = cfg.u32("qk_nope_head_dim"), rope = cfg.u32("qk_rope_head_dim");
            hp.v_head_dim = cfg.u32("v_head_dim");
            if (!cfg.status()) return cfg.status();
            if (nope > 65536 || rope > 65536) return error("config.json: head dims exceed 65536");
            hp.head_dim = nope + rope;  // config.json's head_dim is the rope part
            hp.rotary_dim = rope;
            if (cfg.boolean("rope_interleave", true)) hp.flags |= kRopePairs;
            if (cfg.boolean("attention_bias", false)) return error("config.json: attention_bias is not supported for " + mt->get<std::string>());
            // transformers' DeepSeek-V3 RoPE covers the rope dims whatever the factor says; GLM-4.7-Flash's would
            // rotate fewer dims than the rope part has, which its attention cannot apply.
            if (glm4_lite && partial_rotary != 1.0) return error("config.json: glm4_moe_lite rotates all qk_rope_head_dim dims (partial_rotary_factor 1)");
            partial_rotary = 1.0;
        } else {
            if (cfg.boolean("attention_bias", false)) hp.flags |= kQkvBias;
            if (cfg.boolean("use_qk_norm", false)) hp.flags |= kQkNorm | kQkNormPerHead;
        }
    }
    if (!cfg.status()) return cfg.status();
    if (fam == Family::Mixtral || fam == Family::Qwen2Moe || qwen3)
        if (Status st = read_sliding_window(cfg, cfg_json, fam, hp, sliding); !st) return st;
    if (std::find(moe_layer.begin(), moe_layer.end(), false) != moe_layer.end()) hp.dense_ffn = cfg.u32("intermediate_size");
    if (!cfg.status()) return cfg.status();
    if (Status st = read_mtp_layers(cfg, fam, hp); !st) return st;
    // The MTP layers follow the decoder layers: MoE (as the released heads are), full attention, never sliding.
    moe_layer.resize(size_t(hp.n_layers) + hp.mtp_layers, true);
    sliding.resize(moe_layer.size(), false);
    if (partial_rotary != 1.0) {
        if (!(partial_rotary > 0.0 && partial_rotary < 1.0)) return error("config.json: partial_rotary_factor must lie in (0, 1]");
        hp.rotary_dim = static_cast<uint32_t>(hp.head_dim * partial_rotary);  // int(head_dim * factor), as transformers
        // 0 would mean "all of head_dim" in the file, the opposite of what a tiny factor asks for.
        if (hp.rotary_dim == 0) return error("config.json: partial_rotary_factor " + std::to_string(partial_rotary) + " leaves no dimension to rotate");
    }

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
        if (spec.section == SectionKind::Attention && sliding[spec.layer]) plan.sections.back().layer_flags = kLayerSliding;
        plan.sources.push_back(hf_source_name(fam, hp, spec));
        plan.specs.push_back(spec);
    }
    return plan;
}

// A source name "BASE#op[:expert]" of hf_source_name: a view of BASE. gpt_oss stores each layer's experts stacked,
// gate and up interleaved in one tensor of [experts, hidden, 2·ffn] (input-major: gate = even columns, up = odd ones)
// and down as [experts, ffn, hidden]; DeepSeek's kv_b_proj [heads·(nope + v), kv_lora] holds per head its nope key
// rows, then its value rows; Qwen3-Next / Qwen3.5 group their linear-attention projections per key head, fuse the
// query with its gate, store zero-centred norms and A_log (value maps), and Qwen3.5 fuses its experts.
Result<SourceViewGeometry> source_view_geometry(const std::string& name, const HyperParams& hp, const std::vector<uint64_t>& shape) {
    const size_t hash = name.find('#');
    if (hash == std::string::npos) return error("internal: " + name + " is not a source view");
    const std::string op = name.substr(hash + 1), what = op.substr(0, op.find(':'));
    uint64_t e = 0;
    if (op.find(':') != std::string::npos) e = std::stoull(op.substr(op.find(':') + 1));
    SourceViewGeometry g;
    g.base_name = name.substr(0, hash);
    const uint64_t H = hp.hidden_size, F = hp.expert_ffn, E = hp.n_experts;
    SourceTensor::View& v = g.view;
    auto strided = [&](std::vector<uint64_t> base, std::vector<uint64_t> out, SourceTensor::View view) {
        g.base_shape = std::move(base);
        g.shape = std::move(out);
        g.viewed = true;
        v = view;
    };
    // Rows of the base picked in order (a reordering, not a strided view).
    auto pick = [&](std::vector<uint64_t> base, std::vector<uint64_t> out, auto&& row_of) {
        g.base_shape = std::move(base);
        g.row_order.resize(out[0]);
        for (uint64_t i = 0; i < out[0]; ++i) g.row_order[i] = static_cast<uint32_t>(row_of(i));
        g.shape = std::move(out);
    };
    const uint64_t nk = hp.linear_key_heads, nv = hp.linear_value_heads, dk = hp.linear_key_dim, dv = hp.linear_value_dim;
    const uint64_t r = nk ? nv / nk : 0;  // value heads per key head
    // Tiled value head p holds Hugging Face's (grouped) value head (p % nk)·r + p / nk.
    auto grouped = [&](uint64_t p) { return p % nk * r + p / nk; };
    const uint64_t C = schema::linear_conv_channels(hp), K = hp.linear_conv_kernel, qk = 2 * nk * dk;
    auto tiled_channel = [&](uint64_t c) { return c < qk ? c : qk + grouped((c - qk) / dv) * dv + (c - qk) % dv; };
    if (what == "gate" || what == "up") {  // [E, H, 2F] -> [F, H]: out[r][c] = base[e][c][2r (+1)]
        strided({E, H, 2 * F}, {F, H}, {e * H * 2 * F + (what == "up" ? 1 : 0), 0, 0, 2, 2 * F});
    } else if (what == "down") {  // [E, F, H] -> [H, F]: out[r][c] = base[e][c][r]
        strided({E, F, H}, {H, F}, {e * F * H, 0, 0, 1, H});
    } else if (what == "gate_bias" || what == "up_bias") {  // [E, 2F] -> [F]
        strided({E, 2 * F}, {F}, {e * 2 * F + (what == "up_bias" ? 1 : 0), 0, 0, 2, 0});
    } else if (what == "row") {  // [E, H] -> [H]
        strided({E, H}, {H}, {e * H, 0, 0, 1, 0});
    } else if (what == "k_b" || what == "v_b") {
        const uint64_t heads = hp.n_heads, lora = hp.kv_lora_rank, nope = hp.head_dim - hp.rotary_dim, vd = hp.v_head_dim;
        if (what == "k_b")  // head h's [nope, lora] key block, transposed: out[h·lora + r][c] = base[h(nope+v) + c][r]
            strided({heads * (nope + vd), lora}, {heads * lora, nope}, {0, lora, (nope + vd) * lora, 1, lora});
        else  // head h's [v, lora] value block: out[h·v + r][c] = base[h(nope+v) + nope + r][c]
            strided({heads * (nope + vd), lora}, {heads * vd, lora}, {nope * lora, vd, (nope + vd) * lora, lora, 1});
    } else if (what == "plus1" || what == "negexp") {  // the values mapped, the shape the planned one
        g.base_shape = g.shape = shape;
        g.value_map = what == "plus1" ? SourceTensor::ValueMap::PlusOne : SourceTensor::ValueMap::NegExp;
    } else if (what == "tqkv") {
        pick({C, H}, {C, H}, tiled_channel);
    } else if (what == "trows") {
        pick({nv * dv, H}, {nv * dv, H}, [&](uint64_t i) { return grouped(i / dv) * dv + i % dv; });
    } else if (what == "theads" || what == "tnegexp") {
        const std::vector<uint64_t> heads = shape.size() == 2 ? std::vector<uint64_t>{nv, H} : std::vector<uint64_t>{nv};
        pick(heads, heads, grouped);
        if (what == "tnegexp") g.value_map = SourceTensor::ValueMap::NegExp;
    } else if (what == "tconv") {  // [C, 1, K] -> [C, K], the value channels tiled
        pick({C, 1, K}, {C, K}, tiled_channel);
    } else if (what == "tcols") {  // out_proj [H, nv·dv]: its input columns tiled
        g.base_shape = g.shape = {H, nv * dv};
        g.col_order.resize(nv * dv);
        for (uint64_t i = 0; i < nv * dv; ++i) g.col_order[i] = static_cast<uint32_t>(grouped(i / dv) * dv + i % dv);
    } else if (what == "q" || what == "q_gate") {  // [heads · 2 hd, H]: per head its query, then its gate
        const uint64_t hd = hp.head_dim, heads = hp.n_heads, off = what == "q" ? 0 : hd;
        pick({heads * 2 * hd, H}, {heads * hd, H}, [&](uint64_t i) { return i / hd * 2 * hd + off + i % hd; });
    } else if (what == "qkv" || what == "z") {  // per key head [q (dk), k (dk), v (r·dv), z (r·dv)]
        const uint64_t grp = 2 * dk + 2 * r * dv;
        if (what == "qkv")
            pick({nk * grp, H}, {2 * nk * dk + nv * dv, H}, [&](uint64_t i) {
                if (i < 2 * nk * dk) return i % (nk * dk) / dk * grp + (i < nk * dk ? 0 : dk) + i % dk;  // q, then k
                const uint64_t j = (i - 2 * nk * dk) / dv;                                               // value head
                return j / r * grp + 2 * dk + j % r * dv + (i - 2 * nk * dk) % dv;
            });
        else
            pick({nk * grp, H}, {nv * dv, H}, [&](uint64_t i) { return i / dv / r * grp + 2 * dk + r * dv + i / dv % r * dv + i % dv; });
    } else if (what == "b" || what == "a") {  // per key head [b (r), a (r)]
        pick({2 * nv, H}, {nv, H}, [&](uint64_t j) { return j / r * 2 * r + (what == "a" ? r : 0) + j % r; });
    } else if (what == "conv") {  // [C, 1, K] -> [C, K]
        strided({C, 1, K}, {C, K}, {0, 0, 0, K, 1});
    } else if (what == "fgate" || what == "fup") {  // [E, 2F, H] (gate rows, then up rows) -> [F, H]
        strided({E, 2 * F, H}, {F, H}, {e * 2 * F * H + (what == "fup" ? F * H : 0), 0, 0, H, 1});
    } else if (what == "fdown") {  // [E, H, F] -> [H, F]
        strided({E, H, F}, {H, F}, {e * H * F, 0, 0, F, 1});
    } else {
        return error("internal: unknown source view " + name);
    }
    return g;
}

void SourceViewGeometry::apply(SourceTensor& t) const {
    t.shape = shape;
    t.viewed = viewed;
    t.view = view;
    t.row_order = row_order;
    t.col_order = col_order;
    t.value_map = value_map;
}

namespace {

// The view `name` of its base tensor in the checkpoint (planned as `shape`), checked against the shape config.json
// implies for the base.
Result<SourceTensor> derive_source(const SafetensorsSet& set, const std::string& name, const HyperParams& hp,
                                   const std::vector<uint64_t>& shape) {
    auto geometry = source_view_geometry(name, hp, shape);
    if (!geometry) return geometry.status();
    const SourceViewGeometry& g = geometry.value();
    const SourceTensor* base = set.find(g.base_name);
    if (base == nullptr) return error("tensor " + g.base_name + " is missing from the checkpoint");
    if (base->shape != g.base_shape) {
        std::string got, need;
        for (uint64_t d : base->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
        for (uint64_t d : g.base_shape) need += (need.empty() ? "" : ", ") + std::to_string(d);
        return error("tensor " + g.base_name + " has shape [" + got + "], config.json implies [" + need + "]");
    }
    SourceTensor t = *base;
    t.name = name;
    g.apply(t);
    return t;
}

// Quantises a tensor row by row. The scale searches cost tens of nanoseconds per value, so rows are spread over
// all cores; each row's bytes depend on that row alone, so the output is the same for any thread count. On
// failure the lowest failing row is reported.
Status quantize_tensor(const SourceTensor& src, const PlannedTensor& dst, std::vector<uint8_t>& out) {
    const uint64_t row_bytes = kernels::row_bytes(dst.type, dst.cols);
    out.resize(dst.rows * row_bytes);
    std::mutex failure_lock;
    uint64_t failed_row = dst.rows;
    Status failure;
    auto started = ThreadPool::create(0);
    if (!started) return started.status();
    ThreadPool& pool = *started.value();
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
    if (src.blocks) {  // carried over as they are (GGUF blocks of a type the engine computes on)
        if (*src.blocks != dst.type || src.size != dst.rows * kernels::row_bytes(dst.type, dst.cols))
            return error("tensor " + src.name + ": its " + weight_type_name(*src.blocks) + " blocks do not fill the planned " +
                         weight_type_name(dst.type) + " tensor");
        out.assign(src.data, src.data + src.size);
        return Status::ok();
    }
    switch (dst.type) {
        case WeightType::F32:
            out.resize(n * 4);
            if (src.dtype == SourceDType::F32 && src.row_order.empty() && src.col_order.empty() && !src.viewed &&
                src.value_map == SourceTensor::ValueMap::Same) {
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

namespace {

// What a directory must be before its weights are looked for (so a directory without config.json says that).
Status check_hf_dir(const std::string& hf_dir) {
    std::error_code ec;
    if (!fs::is_directory(hf_dir, ec)) return error(hf_dir + ": not a directory");
    if (!fs::exists(fs::path(hf_dir) / "config.json", ec)) return error(hf_dir + ": no config.json");
    return Status::ok();
}

struct HfPlan {
    Plan plan;
    ConvertSummary summary;
};

// Everything convert_hf decides before it reads a weight: the plan at `type`, tokenizer and chat template included
// (what preview_hf sizes without writing).
// check_hf_dir first.
Result<HfPlan> plan_hf_dir(const std::string& hf_dir, WeightType type, const SafetensorsSet& set) {
    auto cfg_text = read_text(fs::path(hf_dir) / "config.json");
    if (!cfg_text) return cfg_text.status();
    auto gen_text = read_optional(fs::path(hf_dir) / "generation_config.json", kMaxTextSectionBytes);  // a text section of the .bin
    if (!gen_text) return gen_text.status();
    std::string model_config = std::move(cfg_text.value());
    // Qwen3-Next's config does not count its MTP head (llama.cpp's converter counts it from the checkpoint too).
    if (set.find("mtp.fc.weight") != nullptr) {
        auto cfg = parse_json_file(model_config, "config.json");
        if (cfg && cfg->is_object() && cfg->value("model_type", "") == "qwen3_next" && !cfg->contains("mtp_num_hidden_layers") &&
            !cfg->contains("num_nextn_predict_layers")) {
            (*cfg)["mtp_num_hidden_layers"] = 1;
            model_config = cfg->dump();
        }
    }
    auto planned = plan_from_config_text(model_config, gen_text.value().value_or(std::string()), type);
    if (!planned) return error(hf_dir + "/" + planned.message());
    HfPlan out{std::move(planned.value()), {}};
    Plan& plan = out.plan;
    ConvertSummary& summary = out.summary;
    // The authors' sampling defaults travel too (format 2.4), checked as every reader will read them; a config
    // that sets no sampling (only token ids) adds no section.
    if (const std::optional<std::string>& gen = gen_text.value()) {
        auto d = parse_generation_defaults(*gen);
        if (!d) return error(hf_dir + "/generation_config.json: " + d.message());
        if (!d->empty()) plan.sections.insert(plan.sections.begin(), PlannedSection{SectionKind::GenerationConfig, kNone, kNone, {}, *gen});
    }

    // Tokenizer and chat template travel inside the .bin.
    summary.family = plan.family;
    // Both become text sections of the .bin: the bound every reader of one applies (format.h).
    auto tok_file = read_optional(fs::path(hf_dir) / "tokenizer.json", kMaxTextSectionBytes);
    if (!tok_file) return tok_file.status();
    if (const std::optional<std::string>& tok = tok_file.value()) {
        std::string config_text;
        auto tc_file = read_optional(fs::path(hf_dir) / "tokenizer_config.json", kMaxTextSectionBytes);
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
    return out;
}

}  // namespace

Result<ConvertSummary> convert_hf(const std::string& hf_dir, const std::string& out_path, const ConvertOptions& options) {
    if (!format::weight_type_is_known(static_cast<uint32_t>(options.type)) || !weight_type_info(options.type).quantisable)
        return error(std::string("weight type ") + weight_type_name(options.type) + " is not supported by this converter yet");
    if (Status s = check_hf_dir(hf_dir); !s) return s;
    auto set = SafetensorsSet::open_dir(hf_dir);
    if (!set) return set.status();
    auto planned = plan_hf_dir(hf_dir, options.type, set.value());
    if (!planned) return planned.status();
    Plan& plan = planned->plan;
    const ConvertSummary& summary = planned->summary;

    std::map<std::string, SourceTensor> derived;  // the views hf_source_name asked for
    for (size_t i = 0; i < plan.sources.size(); ++i) {
        const std::string& name = plan.sources[i];
        if (name.find('#') == std::string::npos || derived.count(name)) continue;
        auto t = derive_source(set.value(), name, plan.hp, plan.specs[i].shape());
        if (!t) return error(hf_dir + ": " + t.message());
        derived.emplace(name, std::move(t.value()));
    }
    return write_plan(
        plan,
        [&set, &derived](const std::string& name) -> const SourceTensor* {
            auto it = derived.find(name);
            return it != derived.end() ? &it->second : set->find(name);
        },
        hf_dir, out_path, options, summary);
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

Result<ConvertPreview> preview_hf(const std::string& hf_dir) {
    if (Status s = check_hf_dir(hf_dir); !s) return s;
    auto set = SafetensorsSet::open_dir(hf_dir);
    if (!set) return set.status();
    ConvertPreview preview;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(hf_dir, ec))
        if (entry.path().extension() == ".safetensors") preview.source_bytes += entry.file_size(ec);
    for (const WeightTypeInfo& w : weight_types()) {
        if (!w.quantisable) continue;
        auto planned = plan_hf_dir(hf_dir, w.type, set.value());
        if (!planned) return planned.status();
        auto size = BinWriter::planned_size(planned->plan.family, planned->plan.hp, planned->plan.sections);
        if (!size) return error(hf_dir + ": " + size.message());
        if (preview.output_bytes.empty()) describe_plan(planned->plan, planned->summary, &preview);
        preview.output_bytes.emplace_back(w.type, size.value());
    }
    return preview;
}

}  // namespace colibri::tools
