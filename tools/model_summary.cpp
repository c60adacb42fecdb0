#include "engine/file/schema.h"
#include "tools/model_summary.h"

#include <map>
#include <string>

#include "engine/cache/expert_cache.h"
#include "engine/core/model.h"

namespace colibri::tools {

using nlohmann::json;

// What the model's router does (engine/core/router.h), for route's JSON.
json routing_json(const Model& m) {
    const RoutingRules& r = m.rules().routing;
    json j{{"scoring", router_scoring_name(r.scoring)}, {"renormalise", r.renormalise}, {"scaling", r.scaling},
           {"selection_bias", r.selection_bias}, {"top_k", m.hparams().n_experts_active}, {"experts", m.hparams().n_experts}};
    if (r.n_group > 1) j["n_group"] = r.n_group, j["topk_group"] = r.topk_group;
    return j;
}

json model_info_json(const Model& m) {
    const format::HyperParams& hp = m.hparams();
    json j;
    j["family"] = format::family_name(m.family());
    j["format_version"] = std::to_string(m.file().header().version_major) + "." + std::to_string(m.file().header().version_minor);
    j["file_size"] = m.file().size();
    j["compressed"] = m.file().compressed();
    j["stored_size"] = m.file().stored_size();  // bytes on disk (smaller than file_size for a .bin.zst)
    j["vocab_size"] = hp.vocab_size;
    j["hidden_size"] = hp.hidden_size;
    j["layers"] = hp.n_layers;
    j["moe_layers"] = m.moe_layer_count();
    j["heads"] = hp.n_heads;
    j["kv_heads"] = hp.n_kv_heads;
    j["head_dim"] = hp.head_dim;
    j["experts"] = hp.n_experts;
    j["active_experts"] = hp.n_experts_active;
    j["expert_ffn"] = hp.expert_ffn;
    j["shared_expert_ffn"] = hp.shared_expert_ffn;
    j["dense_ffn"] = hp.dense_ffn;
    j["max_position"] = hp.max_position;
    j["rms_eps"] = hp.rms_eps;
    j["rope_theta"] = hp.rope_theta;
    j["norm_topk_prob"] = (hp.flags & format::kNormTopkProb) != 0;
    j["clip_qkv"] = hp.clip_qkv;
    j["bos_id"] = hp.bos_id;
    j["eos_id"] = hp.eos_id;
    // What the family does, as the model decided it at load (format 2.1's hyper-parameters included).
    const ModelRules& rules = m.rules();
    j["routing"] = routing_json(m);
    j["rotary_dim"] = rules.attention.rotary_dim;
    j["rope_scaling"] = hp.rope_scaling == static_cast<uint8_t>(format::RopeScaling::Yarn) ? "yarn" : "none";
    if (rules.attention.sliding_window) j["sliding_window"] = rules.attention.sliding_window;
    if (rules.attention.sinks) j["attention_sinks"] = true;
    if (rules.attention.mla)
        j["latent_attention"] = json{{"q_lora_rank", rules.attention.q_lora_rank}, {"kv_lora_rank", rules.attention.kv_lora_rank},
                                     {"v_head_dim", rules.attention.v_head_dim}};
    if (rules.swiglu_limit > 0.0f) j["swiglu_limit"] = rules.swiglu_limit;
    if (rules.attention.output_gate) j["attention_output_gate"] = true;
    if (hp.linear_key_heads) {  // Gated DeltaNet hybrids: the linear-attention layers and the state each one keeps
        json layers = json::array();
        for (uint32_t l = 0; l < hp.n_layers; ++l)
            if (schema::is_linear_layer(hp, l)) layers.push_back(l);
        const uint64_t state = uint64_t(hp.linear_value_heads) * hp.linear_key_dim * hp.linear_value_dim;
        j["linear_attention"] = json{{"layers", layers},
                                     {"key_heads", hp.linear_key_heads},
                                     {"value_heads", hp.linear_value_heads},
                                     {"key_dim", hp.linear_key_dim},
                                     {"value_dim", hp.linear_value_dim},
                                     {"conv_kernel", hp.linear_conv_kernel},
                                     {"value_heads_tiled", rules.attention.linear_tiled},
                                     {"state_bytes_per_layer", 4 * (state + (hp.linear_conv_kernel - 1) * schema::linear_conv_channels(hp))}};
    }
    if (hp.mtp_layers) {  // the multi-token-prediction head: its layers (after the decoder's) and what each adds per position
        json layers = json::array();
        for (uint32_t k = 0; k < hp.mtp_layers; ++k) layers.push_back(hp.n_layers + k);
        const LayerWeights& w = m.mtp_layers()[0];
        const uint64_t kv = rules.attention.mla ? uint64_t(rules.attention.kv_lora_rank) + rules.attention.rotary_dim
                                                : 2 * uint64_t(hp.n_kv_heads) * hp.head_dim;
        j["mtp"] = json{{"layers", layers},
                        {"moe", w.is_moe},
                        {"chain", rules.mtp_chain_normed ? "after the head's norm" : "before the head's norm"},
                        {"cache_bytes_per_position", 4 * (kv + hp.hidden_size)}};
    }
    std::map<std::string, uint64_t> types;
    for (const TensorView& t : m.file().tensors()) types[format::weight_type_name(t.type)] += t.size;
    j["weight_bytes_by_type"] = types;
    j["sections"] = m.file().sections().size();
    j["tensors"] = m.file().tensors().size();
    j["tokenizer"] = m.tokenizer() ? (m.tokenizer()->kind() == Tokenizer::Kind::ByteLevelBpe ? "byte-level BPE" : "SentencePiece BPE") : "none";
    if (m.tokenizer()) j["tokenizer_vocab"] = m.tokenizer()->vocab_size();
    j["chat_template"] = !m.chat_template().empty();
    // What chat and generate sample with when no sampler option is given (its generation_config.json).
    const std::string sampling = describe_generation_defaults(m.generation_defaults());
    j["sampling_defaults"] = sampling.empty() ? "none (Colibri's)" : sampling;
    return j;
}

// The expert cache's configuration and counters since load (--ram-budget).
json expert_cache_json(const ExpertCache& c) {
    const ExpertCacheStats t = c.total_stats();
    return {{"policy", cache_policy_name(c.policy())}, {"ram_budget", c.budget()}, {"resident_bytes", c.resident_bytes()},
            {"slot_bytes", c.slot_bytes()}, {"slots_per_layer", c.slots_per_layer()}, {"direct_io", c.direct_io()},
            {"hits", t.hits}, {"misses", t.misses}, {"bytes_read", t.bytes_read}, {"stall_ns", t.stall_ns},
            {"prefetch", c.prefetching()}, {"prefetched", t.prefetched}, {"predicted", t.predicted},
            {"predicted_right", t.predicted_right}};
}

}  // namespace colibri::tools
