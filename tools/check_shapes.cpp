#include "check_shapes.h"

#include "engine/model_file.h"

namespace colibri::tools {

using namespace format;

namespace {

class Expectations {
public:
    std::vector<ExpectedTensor> list;

    void matrix(std::string name, uint64_t rows, uint64_t cols, SectionKind s, uint32_t layer = kNone, uint32_t expert = kNone) {
        list.push_back(ExpectedTensor{std::move(name), 2, rows, cols, false, s, layer, expert});
    }
    void vector(std::string name, uint64_t n, SectionKind s, uint32_t layer = kNone) {
        list.push_back(ExpectedTensor{std::move(name), 1, n, 1, true, s, layer, kNone});
    }
    // SwiGLU projections gate/up [ffn, hidden], down [hidden, ffn].
    void ffn(const std::string& prefix, uint64_t hidden, uint64_t ffn, SectionKind s, uint32_t layer, uint32_t expert = kNone) {
        matrix(prefix + ".gate", ffn, hidden, s, layer, expert);
        matrix(prefix + ".up", ffn, hidden, s, layer, expert);
        matrix(prefix + ".down", hidden, ffn, s, layer, expert);
    }
};

// The checks Model::bind() makes before it binds a tensor, as problems instead of a first error.
bool usable(uint32_t family, const HyperParams& hp, const std::vector<bool>& layer_is_moe, std::vector<std::string>* problems) {
    const size_t before = problems->size();
    auto bad = [problems](const std::string& why) { problems->push_back("hyper-parameters: " + why); };
    if (family != static_cast<uint32_t>(Family::Mixtral) && family != static_cast<uint32_t>(Family::Qwen2Moe) &&
        family != static_cast<uint32_t>(Family::Olmoe))
        bad("unknown architecture family " + std::to_string(family));
    if (hp.hidden_size == 0 || hp.n_heads == 0 || hp.n_kv_heads == 0 || hp.head_dim == 0 || hp.vocab_size == 0)
        bad("incomplete (zero hidden size, heads, head_dim or vocabulary)");
    if (hp.n_kv_heads != 0 && hp.n_heads % hp.n_kv_heads != 0)
        bad("n_heads " + std::to_string(hp.n_heads) + " is not a multiple of n_kv_heads " + std::to_string(hp.n_kv_heads));
    if (hp.head_dim % 2 != 0) bad("head_dim " + std::to_string(hp.head_dim) + " is odd (RoPE needs pairs)");
    if (hp.n_experts_active == 0 || hp.n_experts_active > hp.n_experts)
        bad("active experts " + std::to_string(hp.n_experts_active) + " out of range for " + std::to_string(hp.n_experts) + " experts");
    if (!(hp.rms_eps > 0.0f) || !(hp.rope_theta > 0.0f)) bad("rms_eps and rope_theta must be positive");
    if (layer_is_moe.size() != hp.n_layers)
        bad("the layer table has " + std::to_string(layer_is_moe.size()) + " entries for n_layers " + std::to_string(hp.n_layers));
    bool any_dense = false;
    for (size_t l = 0; l < layer_is_moe.size(); ++l) {
        if (layer_is_moe[l]) continue;
        any_dense = true;
        if (hp.dense_ffn == 0) bad("layer " + std::to_string(l) + " is dense but dense_ffn is 0");
    }
    if (!any_dense && hp.dense_ffn != 0) bad("dense_ffn is " + std::to_string(hp.dense_ffn) + " but no layer is dense");
    if (!(hp.flags & kSharedExpert) && hp.shared_expert_ffn != 0)
        bad("shared_expert_ffn is " + std::to_string(hp.shared_expert_ffn) + " but there is no shared expert");
    return problems->size() == before;
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(uint32_t family, const HyperParams& hp, const std::vector<bool>& layer_is_moe,
                                             uint64_t max_tensors, std::vector<std::string>* problems) {
    if (!usable(family, hp, layer_is_moe, problems)) return {};
    // Count first: n_layers × n_experts from a damaged header could be billions. The fewest tensors any model
    // with these layers needs (embed, output_norm; per layer two norms, q, k, v, o and the router with its
    // experts or a dense MLP) may not exceed what the file holds; the list is then at most about twice that.
    uint64_t needed = 2;
    for (const bool moe : layer_is_moe) needed += 6 + (moe ? 1 + 3 * uint64_t(hp.n_experts) : 3);
    if (needed > max_tensors) {
        problems->push_back("hyper-parameters: " + std::to_string(hp.n_layers) + " layers of " + std::to_string(hp.n_experts) +
                            " experts need at least " + std::to_string(needed) + " tensors, the file has " + std::to_string(max_tensors));
        return {};
    }

    Expectations x;
    const uint64_t H = hp.hidden_size, q_dim = uint64_t(hp.n_heads) * hp.head_dim, kv_dim = uint64_t(hp.n_kv_heads) * hp.head_dim;
    x.matrix("embed", hp.vocab_size, H, SectionKind::Embedding);
    for (uint32_t l = 0; l < layer_is_moe.size(); ++l) {
        auto name = [l](std::string_view what) { return tensor_names::layer(l, what); };
        const SectionKind attn = SectionKind::Attention;
        x.vector(name("attn_norm"), H, attn, l);
        x.matrix(name("attn.q"), q_dim, H, attn, l);
        x.matrix(name("attn.k"), kv_dim, H, attn, l);
        x.matrix(name("attn.v"), kv_dim, H, attn, l);
        x.matrix(name("attn.o"), H, q_dim, attn, l);
        if (hp.flags & kQkvBias) {
            x.vector(name("attn.q_bias"), q_dim, attn, l);
            x.vector(name("attn.k_bias"), kv_dim, attn, l);
            x.vector(name("attn.v_bias"), kv_dim, attn, l);
        }
        if (hp.flags & kQkNorm) {
            x.vector(name("attn.q_norm"), q_dim, attn, l);
            x.vector(name("attn.k_norm"), kv_dim, attn, l);
        }
        x.vector(name("ffn_norm"), H, attn, l);
        if (!layer_is_moe[l]) {
            x.ffn(name("mlp"), H, hp.dense_ffn, SectionKind::DenseMlp, l);
            continue;
        }
        x.matrix(name("router"), hp.n_experts, H, SectionKind::Router, l);
        if (hp.flags & kSharedExpert) x.matrix(name("shared_expert_gate"), 1, H, SectionKind::Router, l);
        for (uint32_t e = 0; e < hp.n_experts; ++e)
            x.ffn("layers." + std::to_string(l) + ".experts." + std::to_string(e), H, hp.expert_ffn, SectionKind::Expert, l, e);
        if (hp.flags & kSharedExpert) x.ffn(name("shared_expert"), H, hp.shared_expert_ffn, SectionKind::SharedExpert, l);
    }
    x.vector("output_norm", H, SectionKind::Output);
    if (!(hp.flags & kTiedEmbeddings)) x.matrix("lm_head", hp.vocab_size, H, SectionKind::Output);
    return std::move(x.list);
}

}  // namespace colibri::tools
