#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include "engine/file/format.h"

namespace colibri::format {

const char* weight_type_name(WeightType t) {
    return weight_type_known(static_cast<uint32_t>(t)) ? weight_type_info(t).name : "unknown";
}

bool weight_type_from_name(std::string_view name, WeightType* out) {
    // Case-insensitive, so llama.cpp's spellings (Q8_0, Q4_K) work too; "q4" is the CLI contract's name for
    // the 4-bit type, which is q4_k.
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "q4") lower = "q4_k";
    for (const WeightTypeInfo& w : weight_types()) {
        if (lower == w.name) {
            *out = w.type;
            return true;
        }
    }
    return false;
}

bool weight_type_is_known(uint32_t t) { return weight_type_known(t); }

const char* section_kind_name(SectionKind k) {
    switch (k) {
        case SectionKind::Metadata: return "metadata";
        case SectionKind::TokenizerJson: return "tokenizer";
        case SectionKind::TokenizerConfig: return "tokenizer_config";
        case SectionKind::ChatTemplate: return "chat_template";
        case SectionKind::Embedding: return "embedding";
        case SectionKind::Attention: return "attention";
        case SectionKind::Router: return "router";
        case SectionKind::Expert: return "expert";
        case SectionKind::SharedExpert: return "shared_expert";
        case SectionKind::DenseMlp: return "dense_mlp";
        case SectionKind::Output: return "output";
        case SectionKind::GenerationConfig: return "generation_config";
    }
    return "unknown";
}

bool tensor_bytes(WeightType t, uint64_t rows, uint64_t cols, uint64_t* out) {
    constexpr uint64_t kLimit = uint64_t(1) << 48;  // no real tensor is near this; guards the products
    if (rows == 0 || cols == 0 || rows > kLimit || cols > kLimit || rows * cols > kLimit) return false;
    if (!weight_type_known(static_cast<uint32_t>(t))) return false;
    // Block types: whole blocks per row (docs/FORMAT.md, "Weight types").
    const WeightTypeInfo& w = weight_type_info(t);
    if (cols % w.block_values != 0) return false;
    *out = rows * (cols / w.block_values) * w.block_bytes;
    return true;
}

std::string numeric_hparams_problem(const HyperParams& hp) {
    auto show = [](float f) {  // %g: 1e-07 and inf, not 0.000000
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", static_cast<double>(f));
        return std::string(buf);
    };
    if (!(std::isfinite(hp.rms_eps) && hp.rms_eps > 0.0f)) return "rms_eps " + show(hp.rms_eps) + " is not a finite positive number";
    if (!(std::isfinite(hp.rope_theta) && hp.rope_theta > 0.0f))
        return "rope_theta " + show(hp.rope_theta) + " is not a finite positive number";
    // Zero means "not used" for these; inf or NaN would turn every output into NaN.
    const std::pair<const char*, float> not_negative[] = {
        {"clip_qkv", hp.clip_qkv}, {"routed_scaling", hp.routed_scaling}, {"swiglu_limit", hp.swiglu_limit},
        {"rope_factor", hp.rope_factor}, {"yarn_beta_fast", hp.yarn_beta_fast}, {"yarn_beta_slow", hp.yarn_beta_slow}};
    for (const auto& [name, value] : not_negative)
        if (!(std::isfinite(value) && value >= 0.0f)) return std::string(name) + " " + show(value) + " is not a finite number >= 0";
    for (const auto& [name, value] : {std::pair{"yarn_mscale", hp.yarn_mscale}, std::pair{"yarn_mscale_all_dim", hp.yarn_mscale_all_dim}})
        if (!std::isfinite(value)) return std::string(name) + " " + show(value) + " is not a finite number";
    return {};
}

}  // namespace colibri::format
