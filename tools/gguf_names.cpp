#include "tools/gguf_names.h"

namespace colibri::tools {

using format::Family;
using schema::Role;

namespace {

struct ArchName {
    Family family;
    const char* arch;
};
constexpr ArchName kArchitectures[] = {
    {Family::Mixtral, "llama"},   {Family::Qwen2Moe, "qwen2moe"},     {Family::Olmoe, "olmoe"},
    {Family::Qwen3Moe, "qwen3moe"}, {Family::GptOss, "gpt-oss"},    {Family::DeepseekV3, "deepseek2"},
    {Family::Glm4Moe, "glm4moe"},   {Family::Qwen3Next, "qwen3next"}, {Family::Qwen35Moe, "qwen35moe"},
    {Family::MinimaxM2, "minimax-m2"},
    // llama.cpp writes GLM-4.7-Flash as deepseek2 (the same computation): such files import as deepseek_v3.
    {Family::Glm4MoeLite, "deepseek2"},
};

// Qwen3-Next's and Qwen3.5's own tensors as llama.cpp's converter writes them (its norms as 1 + w, ssm_a as
// −exp(A_log), Qwen3.5's value heads tiled: as the .bin holds them); nullopt for the tensors they share with the others.
std::optional<GgufPlace> hybrid_place(Family family, const format::HyperParams& hp, const schema::TensorSpec& spec) {
    const std::string b = "blk." + std::to_string(spec.layer) + ".";
    const bool next = family == Family::Qwen3Next;
    const uint32_t ratio = hp.linear_key_heads ? hp.linear_value_heads / hp.linear_key_heads : 0;
    switch (spec.role) {
        case Role::FfnNorm: return GgufPlace{b + "post_attention_norm.weight"};
        case Role::Q: return GgufPlace{b + "attn_q.weight", -1, 0, false, false, hp.head_dim, 0, 2};
        case Role::QGate: return GgufPlace{b + "attn_q.weight", -1, 0, false, false, hp.head_dim, 1, 2};
        case Role::O: return GgufPlace{b + (schema::is_linear_layer(hp, spec.layer) ? "ssm_out" : "attn_output") + ".weight"};
        case Role::LinQkv: return GgufPlace{b + "attn_qkv.weight"};
        case Role::LinZ: return GgufPlace{b + "attn_gate.weight"};
        case Role::LinBeta: return next ? GgufPlace{b + "ssm_ba.weight", -1, 0, false, false, ratio, 0, 2} : GgufPlace{b + "ssm_beta.weight"};
        case Role::LinAlpha: return next ? GgufPlace{b + "ssm_ba.weight", -1, 0, false, false, ratio, 1, 2} : GgufPlace{b + "ssm_alpha.weight"};
        case Role::LinConv: return GgufPlace{b + "ssm_conv1d.weight"};
        case Role::LinDtBias: return GgufPlace{b + "ssm_dt.bias"};
        case Role::LinSsmA: return GgufPlace{b + "ssm_a"};
        case Role::LinNorm: return GgufPlace{b + "ssm_norm.weight"};
        default: return std::nullopt;
    }
}


}  // namespace

const char* gguf_architecture(Family family) {
    for (const ArchName& a : kArchitectures)
        if (a.family == family) return a.arch;
    return nullptr;
}

std::optional<Family> family_from_gguf_architecture(const std::string& arch) {
    for (const ArchName& a : kArchitectures)
        if (arch == a.arch) return a.family;
    return std::nullopt;
}

std::optional<GgufPlace> gguf_place(Family family, const format::HyperParams& hp, const schema::TensorSpec& spec) {
    if (family == Family::Qwen3Next || family == Family::Qwen35Moe)
        if (std::optional<GgufPlace> p = hybrid_place(family, hp, spec)) return p;
    const std::string b = "blk." + std::to_string(spec.layer) + ".";
    const bool llama = family == Family::Mixtral;
    const auto whole = [](std::string name) { return GgufPlace{std::move(name) + ".weight"}; };
    const auto bias = [](std::string name) { return GgufPlace{std::move(name) + ".bias"}; };
    const auto expert = [&](const char* what, const char* part) { return GgufPlace{b + what + part, int64_t(spec.expert)}; };
    switch (spec.role) {
        case Role::Embed: return whole("token_embd");
        case Role::OutputNorm: return whole("output_norm");
        case Role::LmHead: return whole("output");
        case Role::AttnNorm: return whole(b + "attn_norm");
        // gpt-oss and GLM-4.5 call the norm before the MLP post_attention_norm.
        case Role::FfnNorm:
            return whole(b + (family == Family::GptOss || family == Family::Glm4Moe ? "post_attention_norm" : "ffn_norm"));
        // With a q LoRA (deepseek_v3), q is the LoRA's second matrix.
        case Role::Q: return GgufPlace{b + (hp.q_lora_rank ? "attn_q_b" : "attn_q") + ".weight", -1, llama ? hp.n_heads : 0};
        case Role::K: return GgufPlace{b + "attn_k.weight", -1, llama ? hp.n_kv_heads : 0};
        case Role::V: return whole(b + "attn_v");
        case Role::O: return whole(b + "attn_output");
        case Role::QBias: return bias(b + "attn_q");
        case Role::KBias: return bias(b + "attn_k");
        case Role::VBias: return bias(b + "attn_v");
        case Role::OBias: return bias(b + "attn_output");
        case Role::QNorm: return whole(b + "attn_q_norm");
        case Role::KNorm: return whole(b + "attn_k_norm");
        case Role::Sinks: return whole(b + "attn_sinks");
        case Role::QA: return whole(b + "attn_q_a");
        case Role::QANorm: return whole(b + "attn_q_a_norm");
        case Role::KvA: return whole(b + "attn_kv_a_mqa");
        case Role::KvANorm: return whole(b + "attn_kv_a_norm");
        case Role::KB: return GgufPlace{b + "attn_k_b.weight", -1, 0, false, true};
        case Role::VB: return GgufPlace{b + "attn_v_b.weight", -1, 0, false, true};
        case Role::Router: return whole(b + "ffn_gate_inp");
        case Role::SharedExpertGate: return GgufPlace{b + "ffn_gate_inp_shexp.weight", -1, 0, true};
        case Role::RouterBias: return bias(b + "ffn_gate_inp");
        case Role::SelectionBias: return bias(b + "exp_probs_b");
        case Role::ExpertGate: return expert("ffn_gate_exps", ".weight");
        case Role::ExpertUp: return expert("ffn_up_exps", ".weight");
        case Role::ExpertDown: return expert("ffn_down_exps", ".weight");
        case Role::ExpertGateBias: return expert("ffn_gate_exps", ".bias");
        case Role::ExpertUpBias: return expert("ffn_up_exps", ".bias");
        case Role::ExpertDownBias: return expert("ffn_down_exps", ".bias");
        case Role::SharedGate: return whole(b + "ffn_gate_shexp");
        case Role::SharedUp: return whole(b + "ffn_up_shexp");
        case Role::SharedDown: return whole(b + "ffn_down_shexp");
        case Role::DenseGate: return whole(b + "ffn_gate");
        case Role::DenseUp: return whole(b + "ffn_up");
        case Role::DenseDown: return whole(b + "ffn_down");
        // The MTP layer blk.{n_layers + k}'s own, as llama.cpp's converter names them (its nextn.embed_tokens and
        // nextn.shared_head_head are the model's token_embd and output again: not written, not read).
        case Role::MtpEnorm: return whole(b + "nextn.enorm");
        case Role::MtpHnorm: return whole(b + "nextn.hnorm");
        case Role::MtpEhProj: return whole(b + "nextn.eh_proj");
        case Role::MtpNorm: return whole(b + "nextn.shared_head_norm");
        case Role::QGate: case Role::LinQkv: case Role::LinZ: case Role::LinBeta: case Role::LinAlpha: case Role::LinConv:
        case Role::LinDtBias: case Role::LinSsmA: case Role::LinNorm: break;  // the hybrids' (hybrid_place)
    }
    return std::nullopt;
}

}  // namespace colibri::tools
