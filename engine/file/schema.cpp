#include "engine/file/schema.h"

namespace colibri {

namespace tensor_names {
std::string layer(uint32_t layer, std::string_view what) {
    return "layers." + std::to_string(layer) + "." + std::string(what);
}
std::string expert(uint32_t layer, uint32_t expert, std::string_view proj) {
    return "layers." + std::to_string(layer) + ".experts." + std::to_string(expert) + "." + std::string(proj);
}
}  // namespace tensor_names

}  // namespace colibri

namespace colibri::schema {

using namespace format;

namespace {

constexpr FamilyInfo kFamilies[] = {
    {Family::Mixtral, "mixtral"},
    {Family::Qwen2Moe, "qwen2_moe"},
    {Family::Olmoe, "olmoe"},
    {Family::Qwen3Moe, "qwen3_moe"},
    {Family::GptOss, "gpt_oss"},
    {Family::DeepseekV3, "deepseek_v3"},
    {Family::Glm4Moe, "glm4_moe"},
    {Family::Qwen3Next, "qwen3_next"},
    {Family::Qwen35Moe, "qwen3_5_moe"},
    {Family::MinimaxM2, "minimax_m2"},
    {Family::Glm4MoeLite, "glm4_moe_lite"},
};

constexpr uint32_t kKnownFlags = (kLinearValueTiled << 1) - 1;


// Appends specs in layout order; names follow docs/FORMAT.md.
class Builder {
public:
    std::vector<TensorSpec> list;

    void matrix(std::string name, Role role, uint64_t rows, uint64_t cols, SectionKind s, uint32_t layer = kNone,
                uint32_t expert = kNone, Kind kind = Kind::Matrix) {
        list.push_back(TensorSpec{std::move(name), role, kind, rows, cols, s, layer, expert});
    }
    void vector(std::string name, Role role, uint64_t n, SectionKind s, uint32_t layer = kNone) {
        list.push_back(TensorSpec{std::move(name), role, Kind::Vector, n, 1, s, layer, kNone});
    }
    // SwiGLU projections: gate/up [ffn, hidden], down [hidden, ffn].
    void ffn(const std::string& prefix, Role gate, uint64_t hidden, uint64_t ffn, SectionKind s, uint32_t layer,
             uint32_t expert = kNone) {
        matrix(prefix + ".gate", gate, ffn, hidden, s, layer, expert);
        matrix(prefix + ".up", Role(uint8_t(gate) + 1), ffn, hidden, s, layer, expert);
        matrix(prefix + ".down", Role(uint8_t(gate) + 2), hidden, ffn, s, layer, expert);
    }
};

// Format 2.2's Gated DeltaNet fields: all set for the hybrid families, all zero for the others.
std::string linear_attention_problem(uint32_t family, const HyperParams& hp) {
    const bool hybrid = family == uint32_t(Family::Qwen3Next) || family == uint32_t(Family::Qwen35Moe);
    for (uint8_t b : hp.reserved_hparams)
        if (b != 0) return "reserved hyper-parameter bytes are not zero";
    const bool any = hp.linear_key_heads || hp.linear_value_heads || hp.linear_key_dim || hp.linear_value_dim ||
                     hp.linear_conv_kernel || hp.full_attention_interval;
    if (!hybrid) return any ? "linear-attention fields are set but only qwen3_next and qwen3_5_moe have Gated DeltaNet layers" : "";
    if (!hp.linear_key_heads || !hp.linear_value_heads || !hp.linear_key_dim || !hp.linear_value_dim || !hp.linear_conv_kernel ||
        !hp.full_attention_interval)
        return "a Gated DeltaNet hybrid needs linear key/value heads and dims, a conv kernel and full_attention_interval";
    if (hp.linear_value_heads % hp.linear_key_heads != 0)
        return "linear value heads " + std::to_string(hp.linear_value_heads) + " are not a multiple of linear key heads " +
               std::to_string(hp.linear_key_heads);
    if (hp.linear_key_heads > 4096 || hp.linear_value_heads > 4096 || hp.linear_key_dim > 4096 || hp.linear_value_dim > 4096 ||
        hp.linear_conv_kernel > 64 || hp.full_attention_interval > 4096)
        return "linear-attention sizes out of range (heads and dims up to 4096, conv kernel up to 64)";
    return "";
}

// A softmax-attention layer's output projection and what the flags add to it: biases, q/k norms, sinks.
void attention_extras(Builder& b, const HyperParams& hp, uint32_t l, uint64_t att_dim) {
    auto name = [l](std::string_view what) { return tensor_names::layer(l, what); };
    const SectionKind attn = SectionKind::Attention;
    const uint64_t H = hp.hidden_size, q_dim = uint64_t(hp.n_heads) * hp.head_dim, kv_dim = uint64_t(hp.n_kv_heads) * hp.head_dim;
    const bool per_head_norm = hp.flags & kQkNormPerHead;
    b.matrix(name("attn.o"), Role::O, H, att_dim, attn, l);
    if (hp.flags & kQkvBias) {
        b.vector(name("attn.q_bias"), Role::QBias, q_dim, attn, l);
        b.vector(name("attn.k_bias"), Role::KBias, kv_dim, attn, l);
        b.vector(name("attn.v_bias"), Role::VBias, kv_dim, attn, l);
    }
    if (hp.flags & kOutputBias) b.vector(name("attn.o_bias"), Role::OBias, H, attn, l);
    if (hp.flags & kQkNorm) {  // olmoe: over the whole projection; qwen3_moe, glm4_moe: per head
        b.vector(name("attn.q_norm"), Role::QNorm, per_head_norm ? hp.head_dim : q_dim, attn, l);
        b.vector(name("attn.k_norm"), Role::KNorm, per_head_norm ? hp.head_dim : kv_dim, attn, l);
    }
    if (hp.flags & kAttentionSinks) b.vector(name("attn.sinks"), Role::Sinks, hp.n_heads, attn, l);
}

}  // namespace

std::span<const FamilyInfo> families() { return kFamilies; }

bool family_has_mtp(uint32_t family) {
    return family == uint32_t(Family::DeepseekV3) || family == uint32_t(Family::Glm4Moe) || family == uint32_t(Family::Glm4MoeLite) ||
           family == uint32_t(Family::Qwen3Next) || family == uint32_t(Family::Qwen35Moe);
}

const FamilyInfo* find_family(uint32_t id) {
    for (const FamilyInfo& f : kFamilies)
        if (static_cast<uint32_t>(f.id) == id) return &f;
    return nullptr;
}

const FamilyInfo* find_family(std::string_view name) {
    for (const FamilyInfo& f : kFamilies)
        if (name == f.name) return &f;
    return nullptr;
}

std::string family_names() {
    std::string s;
    for (const FamilyInfo& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.name);
    return s;
}

}  // namespace colibri::schema

namespace colibri::format {

const char* family_name(Family f) {
    const schema::FamilyInfo* info = schema::find_family(static_cast<uint32_t>(f));
    return info ? info->name : "unknown";
}

bool family_from_name(std::string_view name, Family* out) {
    const schema::FamilyInfo* info = schema::find_family(name);
    if (info) *out = info->id;
    return info != nullptr;
}

}  // namespace colibri::format

namespace colibri::schema {

std::vector<std::string> hyperparam_problems(uint32_t family, const HyperParams& hp, const std::vector<bool>& layer_is_moe) {
    std::vector<std::string> p;
    if (find_family(family) == nullptr) p.push_back("unknown architecture family " + std::to_string(family));
    if (hp.hidden_size == 0 || hp.n_heads == 0 || hp.n_kv_heads == 0 || hp.head_dim == 0 || hp.vocab_size == 0)
        p.push_back("incomplete (zero hidden size, heads, head_dim or vocabulary)");
    if (hp.n_kv_heads != 0 && hp.n_heads % hp.n_kv_heads != 0)
        p.push_back("n_heads " + std::to_string(hp.n_heads) + " is not a multiple of n_kv_heads " + std::to_string(hp.n_kv_heads));
    if (hp.n_experts_active == 0 || hp.n_experts_active > hp.n_experts)
        p.push_back("active experts " + std::to_string(hp.n_experts_active) + " out of range for " + std::to_string(hp.n_experts) + " experts");
    // rms_eps/rope_theta finite and positive, the other floats finite and in range: shared with the writer,
    // which refuses to write what this refuses.
    if (std::string numeric = numeric_hparams_problem(hp); !numeric.empty()) p.push_back(std::move(numeric));
    if (hp.n_experts > kMaxExperts) p.push_back(std::to_string(hp.n_experts) + " experts exceed " + std::to_string(kMaxExperts));
    if (hp.flags & ~kKnownFlags) p.push_back("unknown flags " + std::to_string(hp.flags & ~kKnownFlags));
    // Format 2.1's fields.
    const bool mla = hp.kv_lora_rank != 0;
    const bool latent_family = family == static_cast<uint32_t>(Family::DeepseekV3) || family == static_cast<uint32_t>(Family::Glm4MoeLite);
    if (mla != latent_family)
        p.push_back(mla ? "kv_lora_rank is set but only deepseek_v3 and glm4_moe_lite have latent attention"
                        : "deepseek_v3 and glm4_moe_lite need kv_lora_rank");
    const uint32_t rotary = hp.rotary_dim ? hp.rotary_dim : hp.head_dim;
    if (rotary % 2 != 0 || rotary > hp.head_dim || (mla && rotary >= hp.head_dim))
        p.push_back("rotary_dim " + std::to_string(rotary) + " must be even and within head_dim " + std::to_string(hp.head_dim) +
                    (mla ? " (less, with latent attention)" : ""));
    if (mla && (hp.v_head_dim == 0 || hp.n_kv_heads != hp.n_heads)) p.push_back("latent attention needs v_head_dim and n_kv_heads = n_heads");
    if (!mla && (hp.q_lora_rank != 0 || hp.v_head_dim != 0)) p.push_back("q_lora_rank and v_head_dim are for latent attention only");
    if (hp.router_scoring > 2) p.push_back("unknown router scoring " + std::to_string(hp.router_scoring));
    if (hp.rope_scaling > 1) p.push_back("unknown rope scaling " + std::to_string(hp.rope_scaling));
    if (hp.rope_scaling == 1 && (!(hp.rope_factor >= 1.0f) || hp.rope_original_max_position == 0))
        p.push_back("YaRN needs rope_factor >= 1 and rope_original_max_position");
    if (hp.swiglu_limit > 0.0f && !(hp.flags & kExpertBias))
        p.push_back("swiglu_limit is gpt_oss's clamped activation and needs its expert biases");
    if (hp.n_group > 1 && (hp.n_experts % hp.n_group != 0 || hp.topk_group == 0 || hp.topk_group > hp.n_group))
        p.push_back("n_group " + std::to_string(hp.n_group) + " / topk_group " + std::to_string(hp.topk_group) + " do not fit " +
                    std::to_string(hp.n_experts) + " experts");
    if (std::string linear = linear_attention_problem(family, hp); !linear.empty()) p.push_back(std::move(linear));
    if (hp.mtp_layers > kMaxMtpLayers) p.push_back(std::to_string(hp.mtp_layers) + " multi-token-prediction layers exceed " + std::to_string(kMaxMtpLayers));
    else if (hp.mtp_layers != 0 && !family_has_mtp(family)) p.push_back("multi-token-prediction layers are set but the family has no MTP head");
    if (layer_is_moe.size() != uint64_t(hp.n_layers) + hp.mtp_layers)
        p.push_back("the layer table has " + std::to_string(layer_is_moe.size()) + " entries for n_layers " + std::to_string(hp.n_layers) +
                    (hp.mtp_layers ? " and " + std::to_string(hp.mtp_layers) + " MTP layers" : ""));
    bool any_dense = false;
    for (size_t l = 0; l < layer_is_moe.size(); ++l) {
        if (layer_is_moe[l]) continue;
        any_dense = true;
        if (hp.dense_ffn == 0) p.push_back("layer " + std::to_string(l) + " is dense but dense_ffn is 0");
    }
    // Sizes that no bound tensor vouches for must be zero: the session sizes its buffers from them.
    if (!any_dense && hp.dense_ffn != 0) p.push_back("dense_ffn is set but no layer is dense (dense_ffn " + std::to_string(hp.dense_ffn) + ")");
    if (!(hp.flags & kSharedExpert) && hp.shared_expert_ffn != 0)
        p.push_back("shared_expert_ffn is " + std::to_string(hp.shared_expert_ffn) + " but there is no shared expert");
    return p;
}

uint64_t minimum_tensor_count(const HyperParams& hp, const std::vector<bool>& layer_is_moe) {
    // embed, output_norm; per layer two norms, q, k, v, o and the router with its experts or a dense MLP.
    uint64_t needed = 2;
    for (const bool moe : layer_is_moe) needed += 6 + (moe ? 1 + 3 * uint64_t(hp.n_experts) : 3);
    return needed;
}

std::vector<TensorSpec> tensors(Family family, const HyperParams& hp, const std::vector<bool>& layer_is_moe) {
    (void)family;  // the families differ only in what the hyper-parameters and flags say (hyperparam_problems ties them)
    Builder b;
    const uint64_t H = hp.hidden_size, q_dim = uint64_t(hp.n_heads) * hp.head_dim, kv_dim = uint64_t(hp.n_kv_heads) * hp.head_dim;
    const bool mla = hp.kv_lora_rank != 0;
    const uint64_t rotary = hp.rotary_dim ? hp.rotary_dim : hp.head_dim;
    const uint64_t att_dim = mla ? uint64_t(hp.n_heads) * hp.v_head_dim : q_dim;  // rows into the output projection
    b.matrix("embed", Role::Embed, hp.vocab_size, H, SectionKind::Embedding);
    for (uint32_t l = 0; l < layer_is_moe.size(); ++l) {
        auto name = [l](std::string_view what) { return tensor_names::layer(l, what); };
        const SectionKind attn = SectionKind::Attention;
        if (l >= hp.n_layers) {  // an MTP layer: the norms of its two inputs, their projection, the norm before the head
            b.vector(name("mtp.enorm"), Role::MtpEnorm, H, attn, l);
            b.vector(name("mtp.hnorm"), Role::MtpHnorm, H, attn, l);
            b.matrix(name("mtp.eh_proj"), Role::MtpEhProj, H, 2 * H, attn, l);
            b.vector(name("mtp.norm"), Role::MtpNorm, H, attn, l);
        }
        b.vector(name("attn_norm"), Role::AttnNorm, H, attn, l);
        if (is_linear_layer(hp, l)) {  // Gated DeltaNet: projections, conv1d, decay and gates, gated norm, output
            const uint64_t nv = hp.linear_value_heads, v_dim = nv * hp.linear_value_dim;
            b.matrix(name("linear.qkv"), Role::LinQkv, linear_conv_channels(hp), H, attn, l);
            b.matrix(name("linear.z"), Role::LinZ, v_dim, H, attn, l);
            b.matrix(name("linear.beta"), Role::LinBeta, nv, H, attn, l);
            b.matrix(name("linear.alpha"), Role::LinAlpha, nv, H, attn, l);
            b.matrix(name("linear.conv"), Role::LinConv, linear_conv_channels(hp), hp.linear_conv_kernel, attn, l, kNone, Kind::ExactMatrix);
            b.vector(name("linear.dt_bias"), Role::LinDtBias, nv, attn, l);
            b.vector(name("linear.ssm_a"), Role::LinSsmA, nv, attn, l);
            b.vector(name("linear.norm"), Role::LinNorm, hp.linear_value_dim, attn, l);
            b.matrix(name("linear.out"), Role::O, H, v_dim, attn, l);
        } else if (mla) {
            // Latent attention: q (through a low-rank path when q_lora_rank is set); the kv latent with the
            // shared rope key; k_b takes each head's query into the latent space ([heads·kv_lora, nope], each
            // head's block transposed), v_b each head's output out of it ([heads·v_head_dim, kv_lora]).
            if (hp.q_lora_rank) {
                b.matrix(name("attn.q_a"), Role::QA, hp.q_lora_rank, H, attn, l);
                b.vector(name("attn.q_a_norm"), Role::QANorm, hp.q_lora_rank, attn, l);
            }
            b.matrix(name("attn.q"), Role::Q, q_dim, hp.q_lora_rank ? hp.q_lora_rank : H, attn, l);
            b.matrix(name("attn.kv_a"), Role::KvA, hp.kv_lora_rank + rotary, H, attn, l);
            b.vector(name("attn.kv_a_norm"), Role::KvANorm, hp.kv_lora_rank, attn, l);
            b.matrix(name("attn.k_b"), Role::KB, uint64_t(hp.n_heads) * hp.kv_lora_rank, hp.head_dim - rotary, attn, l);
            b.matrix(name("attn.v_b"), Role::VB, att_dim, hp.kv_lora_rank, attn, l);
        } else {
            b.matrix(name("attn.q"), Role::Q, q_dim, H, attn, l);
            b.matrix(name("attn.k"), Role::K, kv_dim, H, attn, l);
            b.matrix(name("attn.v"), Role::V, kv_dim, H, attn, l);
            if (hp.flags & kAttentionOutputGate) b.matrix(name("attn.q_gate"), Role::QGate, q_dim, H, attn, l);
        }
        if (!is_linear_layer(hp, l)) attention_extras(b, hp, l, att_dim);
        b.vector(name("ffn_norm"), Role::FfnNorm, H, attn, l);
        if (!layer_is_moe[l]) {
            b.ffn(name("mlp"), Role::DenseGate, H, hp.dense_ffn, SectionKind::DenseMlp, l);
            continue;
        }
        b.matrix(name("router"), Role::Router, hp.n_experts, H, SectionKind::Router, l, kNone, Kind::ExactMatrix);
        if ((hp.flags & kSharedExpert) && !(hp.flags & kSharedExpertUngated))
            b.matrix(name("shared_expert_gate"), Role::SharedExpertGate, 1, H, SectionKind::Router, l, kNone, Kind::ExactMatrix);
        if (hp.flags & kRouterBias) b.vector(name("router_bias"), Role::RouterBias, hp.n_experts, SectionKind::Router, l);
        if (hp.flags & kSelectionBias) b.vector(name("selection_bias"), Role::SelectionBias, hp.n_experts, SectionKind::Router, l);
        for (uint32_t e = 0; e < hp.n_experts; ++e) {
            const std::string prefix = "layers." + std::to_string(l) + ".experts." + std::to_string(e);
            b.ffn(prefix, Role::ExpertGate, H, hp.expert_ffn, SectionKind::Expert, l, e);
            if (hp.flags & kExpertBias) {  // gpt_oss: added to the gate, up and down projections' outputs
                b.list.push_back(TensorSpec{prefix + ".gate_bias", Role::ExpertGateBias, Kind::Vector, hp.expert_ffn, 1, SectionKind::Expert, l, e});
                b.list.push_back(TensorSpec{prefix + ".up_bias", Role::ExpertUpBias, Kind::Vector, hp.expert_ffn, 1, SectionKind::Expert, l, e});
                b.list.push_back(TensorSpec{prefix + ".down_bias", Role::ExpertDownBias, Kind::Vector, H, 1, SectionKind::Expert, l, e});
            }
        }
        if (hp.flags & kSharedExpert) b.ffn(name("shared_expert"), Role::SharedGate, H, hp.shared_expert_ffn, SectionKind::SharedExpert, l);
    }
    b.vector("output_norm", Role::OutputNorm, H, SectionKind::Output);
    if (!(hp.flags & kTiedEmbeddings)) b.matrix("lm_head", Role::LmHead, hp.vocab_size, H, SectionKind::Output);
    return std::move(b.list);
}

}  // namespace colibri::schema
