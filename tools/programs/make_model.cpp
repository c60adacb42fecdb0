// colibri-make-model: writes a deterministic random MoE model as a Hugging Face directory (config.json,
// generation_config.json, model.safetensors, optionally a tokenizer), for the demo model and for tests; or, with
// a real-size preset (qwen3-30b-a3b, gpt-oss-20b, qwen3.5-35b-a3b, qwen3-next-80b-a3b), straight into a quantised
// .bin (tools/random_model.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "kernels/splitmix64.h"
#include "engine/file/format.h"
#include "engine/file/mapped_file.h"
#include "engine/file/schema.h"
#include "engine/file/temp_output.h"
#include "tools/convert_plan.h"
#include "tools/random_model.h"
#include "tools/safetensors.h"

using namespace colibri;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The real models' config.json (the fields the converter reads), as their hubs ship them.
// Every file goes through a commit (engine/file/temp_output.h); false after the one-line error.
bool write_file(const fs::path& path, std::string_view text) {
    if (Status s = write_file_atomically(path.string(), text); !s) {
        std::fprintf(stderr, "colibri-make-model: %s\n", s.message().c_str());
        return false;
    }
    return true;
}

json qwen3_30b_a3b_config() {
    return json{{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"attention_bias", false},
                {"bos_token_id", 151643}, {"eos_token_id", 151645}, {"decoder_sparse_step", 1}, {"head_dim", 128},
                {"hidden_act", "silu"}, {"hidden_size", 2048}, {"intermediate_size", 6144},
                {"max_position_embeddings", 40960}, {"mlp_only_layers", json::array()}, {"moe_intermediate_size", 768},
                {"norm_topk_prob", true}, {"num_attention_heads", 32}, {"num_experts", 128}, {"num_experts_per_tok", 8},
                {"num_hidden_layers", 48}, {"num_key_value_heads", 4}, {"rms_norm_eps", 1e-6}, {"rope_scaling", nullptr},
                {"rope_theta", 1000000.0}, {"sliding_window", nullptr}, {"tie_word_embeddings", false},
                {"use_sliding_window", false}, {"vocab_size", 151936}};
}

json gpt_oss_20b_config() {
    json layer_types = json::array();
    for (int l = 0; l < 24; ++l) layer_types.push_back(l % 2 ? "full_attention" : "sliding_attention");
    return json{{"architectures", {"GptOssForCausalLM"}}, {"model_type", "gpt_oss"}, {"attention_bias", true},
                {"eos_token_id", 200002}, {"pad_token_id", 199999}, {"experts_per_token", 4}, {"head_dim", 64},
                {"hidden_act", "silu"}, {"hidden_size", 2880}, {"initial_context_length", 4096},
                {"intermediate_size", 2880}, {"layer_types", layer_types}, {"max_position_embeddings", 131072},
                {"num_attention_heads", 64}, {"num_experts_per_tok", 4}, {"num_hidden_layers", 24},
                {"num_key_value_heads", 8}, {"num_local_experts", 32}, {"rms_norm_eps", 1e-5},
                {"rope_scaling", {{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"factor", 32.0},
                                  {"original_max_position_embeddings", 4096}, {"rope_type", "yarn"}, {"truncate", false}}},
                {"rope_theta", 150000}, {"sliding_window", 128}, {"swiglu_limit", 7.0}, {"tie_word_embeddings", false},
                {"vocab_size", 201088}};
}

// Qwen3-Next-80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct's config.json): 48 layers, three of every four Gated DeltaNet
// (16 key / 32 value heads of 128), every fourth gated attention (16 / 2 heads of 256, a quarter rotary), 512
// experts top-10 of 512 with a gated shared expert of 512. The multi-token-prediction layer is not part of the preset.
json qwen3_next_80b_a3b_config() {
    return json{{"architectures", {"Qwen3NextForCausalLM"}}, {"model_type", "qwen3_next"}, {"attention_bias", false},
                {"bos_token_id", 151643}, {"eos_token_id", 151645}, {"decoder_sparse_step", 1},
                {"full_attention_interval", 4}, {"head_dim", 256}, {"hidden_act", "silu"}, {"hidden_size", 2048},
                {"intermediate_size", 5120}, {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128},
                {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32}, {"linear_value_head_dim", 128},
                {"max_position_embeddings", 262144}, {"mlp_only_layers", json::array()}, {"moe_intermediate_size", 512},
                {"norm_topk_prob", true}, {"num_attention_heads", 16}, {"num_experts", 512}, {"num_experts_per_tok", 10},
                {"num_hidden_layers", 48}, {"num_key_value_heads", 2}, {"partial_rotary_factor", 0.25},
                {"rms_norm_eps", 1e-6}, {"rope_scaling", nullptr}, {"rope_theta", 10000000.0},
                {"shared_expert_intermediate_size", 512}, {"tie_word_embeddings", false}, {"vocab_size", 151936}};
}

// Qwen3.5-35B-A3B's text model in the hub's spelling (Qwen/Qwen3.5-35B-A3B: the multimodal config's text_config):
// 40 layers as Qwen3-Next's with Qwen3.5's separate projections and interleaved MRoPE, 256 experts top-8 of 512
// with a shared expert of 512, Qwen3.5's 248,320-token vocabulary. Vision tower and MTP layer not included.
json qwen3_5_35b_a3b_config() {
    json layer_types = json::array();
    for (int l = 0; l < 40; ++l) layer_types.push_back(l % 4 == 3 ? "full_attention" : "linear_attention");
    const json text{{"model_type", "qwen3_5_moe_text"}, {"attention_bias", false}, {"attn_output_gate", true},
                    {"eos_token_id", 248046}, {"full_attention_interval", 4}, {"head_dim", 256}, {"hidden_act", "silu"},
                    {"hidden_size", 2048}, {"layer_types", layer_types}, {"linear_conv_kernel_dim", 4},
                    {"linear_key_head_dim", 128}, {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32},
                    {"linear_value_head_dim", 128}, {"max_position_embeddings", 262144}, {"moe_intermediate_size", 512},
                    {"num_attention_heads", 16}, {"num_experts", 256}, {"num_experts_per_tok", 8},
                    {"num_hidden_layers", 40}, {"num_key_value_heads", 2}, {"partial_rotary_factor", 0.25},
                    {"rms_norm_eps", 1e-6},
                    {"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}},
                                         {"partial_rotary_factor", 0.25}, {"rope_theta", 10000000.0}, {"rope_type", "default"}}},
                    {"shared_expert_intermediate_size", 512}, {"tie_word_embeddings", false}, {"vocab_size", 248320}};
    return json{{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
                {"text_config", text}, {"tie_word_embeddings", false}};
}

constexpr const char* kFamilyList =
    "mixtral, qwen2_moe, olmoe, qwen3_moe, gpt_oss, deepseek_v3, glm4_moe, glm4_moe_lite or minimax_m2";

struct Spec {
    std::string family = "qwen2_moe";
    uint32_t vocab = 4096, hidden = 128, layers = 4, heads = 4, kv_heads = 2, experts = 8, top_k = 2;
    uint32_t ffn = 256, shared_ffn = 256;
    float init = 0.02f;
    std::optional<float> embedding_init;  // the token embedding's standard deviation; unset: init
    uint64_t seed = 1;
    bool tied = false;
    bool norm_topk_prob = false;
    float clip_qkv = 0.0f;  // olmoe; 0 = none
    std::vector<uint32_t> mlp_only_layers;  // qwen2_moe dense layers
    // deepseek_v3, glm4_moe, glm4_moe_lite: sigmoid routing in expert groups, scaled, shared experts, dense first layers.
    uint32_t n_group = 1, topk_group = 1, shared_experts = 1, first_dense = 1;
    double routed_scaling = 1.0;
    // Latent attention (deepseek_v3, glm4_moe_lite): 0 = derived from the head size (no q LoRA for --q-lora-rank 0).
    uint32_t q_lora_rank = 0, kv_lora_rank = 0, rope_dim = 0, nope_dim = 0, v_head_dim = 0;
    std::optional<json> rope_scaling;  // the hub's rope_scaling (YaRN), none by default
    std::optional<uint32_t> mtp_layers;  // the multi-token-prediction head's layers
};

bool is_latent(const std::string& family) { return family == "deepseek_v3" || family == "glm4_moe_lite"; }
bool is_sigmoid_family(const std::string& family) { return is_latent(family) || family == "glm4_moe"; }

// --mtp-layers: the multi-token-prediction head in the family's own config spelling (num_nextn_predict_layers, or
// Qwen's mtp_num_hidden_layers, inside Qwen3.5's text_config); false after the one-line error.
bool add_mtp_layers(json& cfg, uint32_t n) {
    json& text = cfg.contains("text_config") && cfg["text_config"].is_object() ? cfg["text_config"] : cfg;
    const std::string family = text.value("model_type", std::string());
    if (family == "deepseek_v3" || family == "kimi_k2" || family == "glm4_moe" || family == "glm4_moe_lite") {
        text["num_nextn_predict_layers"] = n;
    } else if (family == "qwen3_next" || family == "qwen3_5_moe_text") {
        text["mtp_num_hidden_layers"] = n;
    } else {
        std::fprintf(stderr, "colibri-make-model: --mtp-layers: %s has no multi-token-prediction head (deepseek_v3, glm4_moe, "
                     "glm4_moe_lite, qwen3_next, qwen3_5_moe)\n", family.c_str());
        return false;
    }
    return true;
}

// Kimi-K2's layout (moonshotai/Kimi-K2-Instruct's config.json: deepseek_v3 with 384 experts top-8, 64 heads, one
// expert group, routed_scaling_factor 2.827, one shared expert, a dense first layer, YaRN factor 32 from 4096 with
// beta 1 / 1 and mscale = mscale_all_dim = 1, theta 50000), narrowed to a width a test runs in: hidden 64, 2 layers,
// the MLA ranks and head sizes divided by 16 or more (q LoRA 1536 -> 48, kv LoRA 512 -> 32, nope 128 -> 16, rope 64 -> 8).
void kimi_k2_shape(Spec& s) {
    s.family = "deepseek_v3";
    s.vocab = 4096;
    s.hidden = 64;
    s.layers = 2;
    s.heads = 64;
    s.kv_heads = 64;
    s.experts = 384;
    s.top_k = 8;
    s.ffn = 16;
    s.n_group = 1;
    s.topk_group = 1;
    s.shared_experts = 1;
    s.first_dense = 1;
    s.routed_scaling = 2.827;
    s.norm_topk_prob = true;
    s.q_lora_rank = 48;
    s.kv_lora_rank = 32;
    s.rope_dim = 8;
    s.nope_dim = 16;
    s.v_head_dim = 16;
    if (!s.embedding_init) s.embedding_init = 1.0f;  // spreads the tokens over the experts (random_model.h)
    s.rope_scaling = json{{"type", "yarn"}, {"factor", 32.0}, {"original_max_position_embeddings", 4096}, {"beta_fast", 1.0},
                          {"beta_slow", 1.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
}

// Norm weights start at 1; every other tensor is drawn.
bool is_norm(schema::Role r) {
    using schema::Role;
    return r == Role::AttnNorm || r == Role::FfnNorm || r == Role::QNorm || r == Role::KNorm || r == Role::OutputNorm ||
           r == Role::QANorm || r == Role::KvANorm || r == Role::MtpEnorm || r == Role::MtpHnorm || r == Role::MtpNorm;
}

// The order the values are drawn in and the file lays the tensors out in: the schema's, except that each layer's
// post-attention norm follows its input norm and the shared expert's gate closes the layer. That is the order this
// tool wrote before it read the schema, so models made with a seed stay byte-identical.
std::vector<size_t> draw_order(const std::vector<schema::TensorSpec>& specs) {
    using schema::Role;
    auto rank = [&](size_t i) {
        const schema::TensorSpec& t = specs[i];
        const uint64_t group = t.role == Role::Embed ? 0 : t.layer != format::kNone ? uint64_t(t.layer) + 1 : UINT64_MAX;
        const int within = t.role == Role::AttnNorm ? 0 : t.role == Role::FfnNorm ? 1 : t.role == Role::SharedExpertGate ? 3 : 2;
        return std::pair(group, within);
    };
    std::vector<size_t> order(specs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });
    return order;
}

// config.json's fields for the sigmoid-routed families, DeepSeek-V3's spelling (GLM-4.7-Flash's hub config uses it too).
void add_sigmoid_family_fields(const Spec& s, json& cfg) {
    const uint32_t head_dim = s.hidden / s.heads;
    cfg["n_routed_experts"] = s.experts;
    cfg["moe_intermediate_size"] = s.ffn;
    cfg["intermediate_size"] = s.ffn * 4;
    cfg["n_shared_experts"] = s.shared_experts;
    cfg["n_group"] = s.n_group;
    cfg["topk_group"] = s.topk_group;
    cfg["routed_scaling_factor"] = s.routed_scaling;
    cfg["norm_topk_prob"] = s.norm_topk_prob;
    cfg["first_k_dense_replace"] = s.first_dense;
    cfg["scoring_func"] = "sigmoid";
    cfg["topk_method"] = "noaux_tc";
    if (!is_latent(s.family)) {  // glm4_moe: GQA with q/k/v biases and half-rotary heads
        cfg["head_dim"] = head_dim;
        cfg["partial_rotary_factor"] = 0.5;
        cfg["attention_bias"] = true;
        cfg["use_qk_norm"] = false;
        return;
    }
    const uint32_t rope = s.rope_dim ? s.rope_dim : head_dim / 2;
    cfg["num_key_value_heads"] = s.heads;  // latent attention: every head its own key and value
    if (s.q_lora_rank) cfg["q_lora_rank"] = s.q_lora_rank;
    else cfg["q_lora_rank"] = nullptr;
    cfg["kv_lora_rank"] = s.kv_lora_rank ? s.kv_lora_rank : s.hidden / 2;
    cfg["qk_nope_head_dim"] = s.nope_dim ? s.nope_dim : head_dim;
    cfg["qk_rope_head_dim"] = rope;
    cfg["v_head_dim"] = s.v_head_dim ? s.v_head_dim : head_dim;
    cfg["head_dim"] = rope;
    cfg["rope_interleave"] = true;
    cfg["attention_bias"] = false;
    if (s.rope_scaling) {
        cfg["rope_scaling"] = *s.rope_scaling;
        cfg["max_position_embeddings"] = 131072;
        cfg["rope_theta"] = 50000.0;
    }
    if (s.family == "glm4_moe_lite") {  // transformers 5.2 reads mlp_layer_types, the hub's converters first_k_dense_replace
        cfg["num_nextn_predict_layers"] = 0;
        json types = json::array();
        for (uint32_t l = 0; l < s.layers; ++l) types.push_back(l < s.first_dense ? "dense" : "sparse");
        cfg["mlp_layer_types"] = types;
    }
}

// config.json of a family at the shape the options give: the fields the converter reads, each family's own as its
// reference checkpoint spells them (shared/reference/hf/<family>/model/config.json).
std::optional<json> family_config(const Spec& s) {
    const bool mixtral = s.family == "mixtral", qwen = s.family == "qwen2_moe", qwen3 = s.family == "qwen3_moe";
    const bool olmoe = s.family == "olmoe", gpt_oss = s.family == "gpt_oss";
    const bool minimax = s.family == "minimax_m2";
    if (!mixtral && !qwen && !qwen3 && !olmoe && !gpt_oss && !minimax && !is_sigmoid_family(s.family)) return std::nullopt;
    static const std::map<std::string, const char*> architecture{
        {"mixtral", "MixtralForCausalLM"},   {"qwen2_moe", "Qwen2MoeForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"},
        {"olmoe", "OlmoeForCausalLM"},       {"gpt_oss", "GptOssForCausalLM"},     {"deepseek_v3", "DeepseekV3ForCausalLM"},
        {"glm4_moe", "Glm4MoeForCausalLM"},  {"glm4_moe_lite", "Glm4MoeLiteForCausalLM"}, {"minimax_m2", "MiniMaxM2ForCausalLM"}};
    json cfg{{"architectures", {architecture.at(s.family)}},
             {"model_type", s.family},        {"hidden_size", s.hidden},
             {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
             {"num_key_value_heads", s.kv_heads}, {"vocab_size", s.vocab},
             {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-6},
             {"rope_theta", 1000000.0},       {"num_experts_per_tok", s.top_k},
             {"hidden_act", "silu"},          {"tie_word_embeddings", s.tied},
             {"bos_token_id", 1},             {"eos_token_id", 2},
             {"torch_dtype", "float32"}};
    const uint32_t head_dim = s.hidden / s.heads;
    if (mixtral) {
        cfg["num_local_experts"] = s.experts;
        cfg["intermediate_size"] = s.ffn;
    } else if (qwen || qwen3) {
        cfg["num_experts"] = s.experts;
        cfg["moe_intermediate_size"] = s.ffn;
        cfg["intermediate_size"] = s.ffn * 4;
        cfg["norm_topk_prob"] = s.norm_topk_prob;
        cfg["decoder_sparse_step"] = 1;
        cfg["mlp_only_layers"] = s.mlp_only_layers;
        if (qwen) {
            cfg["shared_expert_intermediate_size"] = s.shared_ffn;
        } else {  // per-head q/k norms, no shared expert, head_dim given explicitly
            cfg["head_dim"] = head_dim;
            cfg["attention_bias"] = false;
        }
    } else if (olmoe) {
        cfg["num_experts"] = s.experts;
        cfg["intermediate_size"] = s.ffn;
        cfg["norm_topk_prob"] = s.norm_topk_prob;
        cfg["clip_qkv"] = s.clip_qkv > 0.0f ? json(s.clip_qkv) : json(nullptr);
    } else if (gpt_oss) {  // stacked experts with biases, attention sinks, alternating sliding windows, YaRN
        json layer_types = json::array();
        for (uint32_t l = 0; l < s.layers; ++l) layer_types.push_back(l % 2 ? "full_attention" : "sliding_attention");
        cfg["num_local_experts"] = s.experts;
        cfg["experts_per_token"] = s.top_k;
        cfg["intermediate_size"] = s.ffn;
        cfg["head_dim"] = head_dim;
        cfg["attention_bias"] = true;
        cfg["layer_types"] = layer_types;
        cfg["sliding_window"] = 128;
        cfg["swiglu_limit"] = 7.0;
        cfg["rms_norm_eps"] = 1e-5;
        cfg.erase("rope_theta");
        cfg["rope_parameters"] = {{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"factor", 32.0}, {"original_max_position_embeddings", 4096},
                                  {"rope_theta", 150000.0}, {"rope_type", "yarn"}, {"truncate", false}};
    } else if (is_sigmoid_family(s.family)) {  // deepseek_v3, glm4_moe, glm4_moe_lite
        add_sigmoid_family_fields(s, cfg);
    } else if (minimax) {  // the hub's spelling, with its remote-code switches
        cfg["num_local_experts"] = s.experts;
        cfg["intermediate_size"] = s.ffn;
        cfg["head_dim"] = head_dim;
        cfg["rotary_dim"] = head_dim / 2;
        cfg["use_qk_norm"] = true;
        cfg["qk_norm_type"] = "per_layer";
        cfg["scoring_func"] = "sigmoid";
        cfg["use_routing_bias"] = true;
        cfg["shared_intermediate_size"] = 0;
        cfg["attn_type_list"] = std::vector<int>(s.layers, 1);
    }
    return cfg;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"colibri-make-model: a deterministic random MoE model in Hugging Face format"};
    Spec s;
    std::string out_dir, tokenizer_dir;
    app.add_option("-o,--output", out_dir, "output directory")->required();
    app.add_option("--family", s.family, kFamilyList);
    std::string config_path;
    app.add_option("--config", config_path,
                   "a config.json to make the model from (any family the converter reads), instead of --family and "
                   "the shape options");
    app.add_option("--vocab", s.vocab, "vocabulary size");
    app.add_option("--hidden", s.hidden, "hidden size");
    app.add_option("--layers", s.layers, "layers");
    app.add_option("--heads", s.heads, "attention heads");
    app.add_option("--kv-heads", s.kv_heads, "key/value heads");
    app.add_option("--experts", s.experts, "experts per layer");
    app.add_option("--top-k", s.top_k, "active experts per token");
    app.add_option("--ffn", s.ffn, "expert intermediate size");
    app.add_option("--shared-ffn", s.shared_ffn, "shared expert intermediate size (qwen2_moe)");
    app.add_option("--init", s.init, "standard deviation of the weights");
    app.add_option("--embedding-init", s.embedding_init,
                   "standard deviation of the token embedding (default: --init, whose models route a sequence's "
                   "tokens alike); 4 spreads routing over the experts (tools/random_model.h)");
    app.add_option("--seed", s.seed, "random seed");
    app.add_flag("--tied", s.tied, "tie the lm head to the embedding");
    app.add_flag("--norm-topk-prob", s.norm_topk_prob, "qwen2_moe/olmoe: renormalise the top-k routing weights");
    app.add_option("--clip-qkv", s.clip_qkv, "olmoe: clamp q, k and v to this magnitude");
    app.add_option("--mlp-only-layers", s.mlp_only_layers, "qwen2_moe: layers with a dense MLP instead of experts");
    app.add_option("--n-group", s.n_group, "deepseek_v3, glm4_moe(_lite): expert groups");
    app.add_option("--topk-group", s.topk_group, "deepseek_v3, glm4_moe(_lite): groups a token's experts come from");
    app.add_option("--routed-scaling", s.routed_scaling, "deepseek_v3, glm4_moe(_lite): routed_scaling_factor");
    app.add_option("--shared-experts", s.shared_experts, "deepseek_v3, glm4_moe(_lite): shared experts (n_shared_experts)");
    app.add_option("--first-dense", s.first_dense, "deepseek_v3, glm4_moe(_lite): leading dense layers");
    app.add_option("--q-lora-rank", s.q_lora_rank, "deepseek_v3, glm4_moe_lite: rank of the query's low-rank path (0: none)");
    app.add_option("--kv-lora-rank", s.kv_lora_rank, "deepseek_v3, glm4_moe_lite: rank of the kv latent (default hidden / 2)");
    app.add_option("--rope-dim", s.rope_dim, "deepseek_v3, glm4_moe_lite: rope dims per head (default half the head size)");
    app.add_option("--mtp-layers", s.mtp_layers,
                   "deepseek_v3, glm4_moe, glm4_moe_lite, qwen3_next, qwen3_5_moe: multi-token-prediction layers (the head "
                   "speculative decoding drafts with; qwen: 0 or 1)");
    app.add_option("--tokenizer", tokenizer_dir, "directory with tokenizer.json / tokenizer_config.json to include");
    std::string preset;
    bool config_only = false;
    app.add_option("--preset", preset,
                   "bench: the benchmark model (mixtral, 8 layers, hidden 1024, 16 heads / 4 KV heads, 8 experts top-2, "
                   "expert ffn 2816, vocab 32000), an HF directory; kimi-k2-shape: Kimi-K2's layout (deepseek_v3, 384 "
                   "experts top-8, 64 heads, one expert group, scaling 2.827, its YaRN) at hidden 64, 2 layers, an HF "
                   "directory; qwen3-30b-a3b (every matrix q4_k, 17.3 GB) or "
                   "gpt-oss-20b (experts mxfp4, the other matrices q8_0, 12.8 GB), qwen3.5-35b-a3b and "
                   "qwen3-next-80b-a3b (the Gated DeltaNet hybrids' text models, matrices q4_k, 19.6 and 45.0 GB): the "
                   "real shapes, written straight into a .bin (-o model.bin)");
    std::string type_name;
    app.add_option("--type", type_name, "real-size presets: the matrices' weight type instead of the preset's");
    app.add_flag("--config-only", config_only, "write config.json and generation_config.json only, no weights");
    CLI11_PARSE(app, argc, argv);
    const std::map<std::string, json (*)()> real_size = {{"qwen3-30b-a3b", qwen3_30b_a3b_config},
                                                         {"gpt-oss-20b", gpt_oss_20b_config},
                                                         {"qwen3.5-35b-a3b", qwen3_5_35b_a3b_config},
                                                         {"qwen3-next-80b-a3b", qwen3_next_80b_a3b_config}};
    if (real_size.count(preset)) {
        const bool all_q4_k = preset != "gpt-oss-20b";  // every matrix q4_k; gpt-oss: experts mxfp4, the rest q8_0
        const json cfg = real_size.at(preset)();
        if (s.mtp_layers) {
            std::fprintf(stderr, "colibri-make-model: --mtp-layers: the %s preset has no multi-token-prediction head\n", preset.c_str());
            return 1;
        }
        if (config_only) {
            std::error_code mk;
            fs::create_directories(out_dir, mk);
            return write_file(fs::path(out_dir) / "config.json", cfg.dump(2) + "\n") ? 0 : 1;
        }
        tools::RandomModelOptions options;
        options.matrix_type = all_q4_k ? WeightType::Q4_K : WeightType::Q8_0;
        if (!all_q4_k) options.expert_type = WeightType::MXFP4;
        if (!type_name.empty()) {
            WeightType t;
            if (!format::weight_type_from_name(type_name, &t)) {
                std::fprintf(stderr, "colibri-make-model: --type: unknown weight type '%s'\n", type_name.c_str());
                return 1;
            }
            options.matrix_type = t;
            options.expert_type.reset();
        }
        options.init = s.init;
        options.embedding_init = s.embedding_init;
        options.seed = s.seed;
        const bool tty = isatty(STDERR_FILENO);
        if (tty)
            options.progress = [](uint64_t done, uint64_t total) {
                std::fprintf(stderr, "\rwriting: %3d%%", total ? int(100.0 * double(done) / double(total)) : 100);
                return true;
            };
        auto written = tools::write_random_model(cfg, out_dir, options);
        if (tty) std::fprintf(stderr, "\n");
        if (!written) {
            std::fprintf(stderr, "colibri-make-model: %s: %s\n", out_dir.c_str(), written.message().c_str());
            return 1;
        }
        return 0;
    }
    if (!preset.empty()) {
        if (preset != "bench" && preset != "kimi-k2-shape") {
            std::fprintf(stderr, "colibri-make-model: --preset: unknown preset '%s' (bench, kimi-k2-shape, qwen3-30b-a3b, gpt-oss-20b, "
                         "qwen3.5-35b-a3b, qwen3-next-80b-a3b)\n",
                         preset.c_str());
            return 1;
        }
        for (const char* shape : {"--family", "--vocab", "--hidden", "--layers", "--heads", "--kv-heads", "--experts",
                                  "--top-k", "--ffn", "--shared-ffn", "--mlp-only-layers", "--n-group", "--topk-group",
                                  "--routed-scaling", "--shared-experts", "--first-dense", "--q-lora-rank", "--kv-lora-rank",
                                  "--rope-dim", "--norm-topk-prob"}) {
            if (app.count(shape)) {
                std::fprintf(stderr, "colibri-make-model: %s: the %s preset fixes the shape\n", shape, preset.c_str());
                return 1;
            }
        }
    }
    if (preset == "kimi-k2-shape") kimi_k2_shape(s);
    if (preset == "bench") {
        s.family = "mixtral";
        s.layers = 8;
        s.hidden = 1024;
        s.heads = 16;
        s.kv_heads = 4;
        s.ffn = 2816;
        s.experts = 8;
        s.top_k = 2;
        s.vocab = 32000;
    }
    json cfg;
    if (!config_path.empty()) {
        for (const char* shape : {"--family", "--vocab", "--hidden", "--layers", "--heads", "--kv-heads", "--experts",
                                  "--top-k", "--ffn", "--shared-ffn", "--mlp-only-layers", "--tied", "--norm-topk-prob",
                                  "--clip-qkv", "--preset", "--n-group", "--topk-group", "--routed-scaling",
                                  "--shared-experts", "--first-dense", "--q-lora-rank", "--kv-lora-rank", "--rope-dim"}) {
            if (app.count(shape)) {
                std::fprintf(stderr, "colibri-make-model: %s: --config gives the shape\n", shape);
                return 1;
            }
        }
        auto text = read_small_file(config_path);
        if (!text) {
            std::fprintf(stderr, "colibri-make-model: %s\n", text.message().c_str());
            return 1;
        }
        cfg = json::parse(text.value(), nullptr, false);
        if (cfg.is_discarded() || !cfg.is_object()) {
            std::fprintf(stderr, "colibri-make-model: %s: not a JSON object\n", config_path.c_str());
            return 1;
        }
        s.family = cfg.value("model_type", std::string());
    } else {
        auto built = family_config(s);
        if (!built) {
            std::fprintf(stderr, "colibri-make-model: unknown family '%s' (%s; or give a config.json with --config)\n",
                         s.family.c_str(), kFamilyList);
            return 1;
        }
        cfg = std::move(*built);
    }
    if (s.mtp_layers && !add_mtp_layers(cfg, *s.mtp_layers)) return 1;
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) {
        std::fprintf(stderr, "colibri-make-model: %s: %s\n", out_dir.c_str(), ec.message().c_str());
        return 1;
    }
    if (config_only) {
        const bool ok = write_file(fs::path(out_dir) / "config.json", cfg.dump(2) + "\n") &&
                        write_file(fs::path(out_dir) / "generation_config.json", json{{"bos_token_id", 1}, {"eos_token_id", 2}}.dump(2) + "\n");
        return ok ? 0 : 1;
    }
    // The tensors are the family's schema (engine/file/schema.h) as the converter plans it from this config, under
    // the Hugging Face names the converter reads them by, so a family's tensors are written down nowhere else.
    auto planned = tools::plan_model(cfg, {}, WeightType::F32);
    if (!planned) {
        std::fprintf(stderr, "colibri-make-model: %s\n", planned.message().c_str());
        return 1;
    }
    const tools::Plan& plan = planned.value();
    SplitMix64 g(s.seed);  // Box-Muller deviates: the same numbers on every platform for a seed
    std::vector<tools::OutputTensor> tensors;
    std::map<std::string, size_t> stacked;  // base name -> its tensor, for checkpoints that stack (gpt_oss, deepseek_v3)
    for (size_t i : draw_order(plan.specs)) {
        const schema::TensorSpec& spec = plan.specs[i];
        const std::string& name = plan.sources[i];
        std::vector<float> values(spec.rows * spec.cols);
        if (is_norm(spec.role)) {
            std::fill(values.begin(), values.end(), 1.0f);
        } else {
            const float sd = spec.role == schema::Role::Embed ? s.embedding_init.value_or(s.init)
                             : spec.role == schema::Role::Router ? s.init * 10  // a router with some preference
                                                                 : s.init;
            for (float& v : values) v = g.gaussian() * sd;
        }
        if (name.find('#') == std::string::npos) {
            tools::OutputTensor t{name, spec.kind == schema::Kind::Vector ? std::vector<uint64_t>{spec.rows} : std::vector<uint64_t>{spec.rows, spec.cols}, std::move(values)};
            tensors.push_back(std::move(t));
            continue;
        }
        // A view of a stacked (or reordered, or value-mapped) tensor: its values go where the converter's view
        // reads them from.
        auto geometry = tools::source_view_geometry(name, plan.hp, spec.shape());
        if (!geometry) {
            std::fprintf(stderr, "colibri-make-model: %s\n", geometry.message().c_str());
            return 1;
        }
        const tools::SourceViewGeometry& view = geometry.value();
        auto [at, first] = stacked.emplace(view.base_name, tensors.size());
        if (first) {
            uint64_t n = 1;
            for (uint64_t d : view.base_shape) n *= d;
            tensors.push_back(tools::OutputTensor{view.base_name, view.base_shape, std::vector<float>(n)});
        }
        tools::SourceTensor placed{};
        view.apply(placed);
        std::vector<float>& base = tensors[at->second].values;
        // A zero-centred norm is stored as w for 1 + w; a decay as A_log for -exp(A_log): any drawn value is one.
        const float shift = view.value_map == tools::SourceTensor::ValueMap::PlusOne ? 1.0f : 0.0f;
        for (uint64_t e = 0; e < values.size(); ++e) base[tools::source_index(placed, e)] = values[e] - shift;
    }

    json gen{{"bos_token_id", 1}, {"eos_token_id", 2}};
    if (!tokenizer_dir.empty()) {
        std::string tokenizer_json;
        for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
            auto text = read_small_file((fs::path(tokenizer_dir) / f).string());
            if (!text) {
                std::fprintf(stderr, "colibri-make-model: %s\n", text.message().c_str());
                return 1;
            }
            if (!write_file(fs::path(out_dir) / f, text.value())) return 1;
            if (f == std::string_view("tokenizer.json")) tokenizer_json = std::move(text.value());
        }
        // End of turn for chat templates of the ChatML kind.
        const json tok = json::parse(tokenizer_json, nullptr, false);
        if (!tok.is_discarded() && tok.contains("added_tokens")) {
            for (const json& t : tok["added_tokens"]) {
                if (t.value("content", "") == "<|im_end|>") gen["eos_token_id"] = t["id"];
                if (t.value("content", "") == "<|endoftext|>") cfg["bos_token_id"] = t["id"];
            }
        }
    }
    if (!write_file(fs::path(out_dir) / "config.json", cfg.dump(2) + "\n") ||
        !write_file(fs::path(out_dir) / "generation_config.json", gen.dump(2) + "\n"))
        return 1;
    if (Status st = tools::write_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors); !st) {
        std::fprintf(stderr, "colibri-make-model: %s\n", st.message().c_str());
        return 1;
    }
    return 0;
}
