// libFuzzer target: planning a model from config.json (what `colibri convert` does before it reads a tensor).
// The input is config.json, optionally followed by a NUL and generation_config.json. Planning must refuse it
// with one error line, or give a plan the loader would accept: hyper-parameters in range, one source per
// planned tensor, and a size that stays small whatever the counts claim.
#include <cstdint>
#include <string_view>

#include <vector>

#include "engine/core/generation_defaults.h"
#include "engine/file/format.h"
#include "engine/file/schema.h"
#include "fuzz_support.h"
#include "tools/convert_plan.h"

using namespace colibri;
using colibri::fuzz::fuzz_check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view config = input.substr(0, nul);
    const std::string_view generation = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
    // The sampling defaults the converter then carries (and every reader parses): refused in one line or in range.
    if (auto d = parse_generation_defaults(generation); !d) {
        fuzz::check_error_message(d.message());
    } else {
        fuzz_check(!d->temperature || (*d->temperature >= 0.0f && *d->temperature <= 100.0f), "a temperature out of range");
        fuzz_check(!d->top_p || (*d->top_p >= 0.0f && *d->top_p <= 1.0f), "a top_p out of range");
        fuzz_check(!d->top_k || *d->top_k >= 0, "a negative top_k");
        fuzz_check(!d->repetition_penalty || *d->repetition_penalty > 0.0f, "a repetition penalty <= 0");
    }
    for (const format::WeightType type : {format::WeightType::F16, format::WeightType::Q4_K}) {
        auto plan = tools::plan_from_config_text(config, generation, type);
        if (!plan) {
            fuzz::check_error_message(plan.message());
            continue;
        }
        const format::HyperParams& hp = plan->hp;
        std::vector<bool> layer_is_moe(hp.n_layers, false);
        for (const auto& s : plan->sections)
            if (s.kind == format::SectionKind::Router && s.layer < hp.n_layers) layer_is_moe[s.layer] = true;
        fuzz_check(schema::hyperparam_problems(static_cast<uint32_t>(plan->family), hp, layer_is_moe).empty(),
                   "planned hyper-parameters that the loader refuses");
        fuzz_check(hp.n_experts_active >= 1 && hp.n_experts_active <= hp.n_experts, "active experts out of range");
        fuzz_check(hp.n_kv_heads > 0 && hp.n_heads % hp.n_kv_heads == 0, "heads not a multiple of kv heads");
        fuzz_check(hp.max_position > 0, "a context of zero positions");
        fuzz_check(hp.bos_id < 0 || static_cast<uint32_t>(hp.bos_id) < hp.vocab_size, "bos outside the vocabulary");
        fuzz_check(hp.eos_id < 0 || static_cast<uint32_t>(hp.eos_id) < hp.vocab_size, "eos outside the vocabulary");
        size_t tensors = 0;
        for (const auto& s : plan->sections) tensors += s.tensors.size();
        fuzz_check(tensors == plan->sources.size(), "planned tensors and their sources differ in number");
        fuzz_check(plan->sections.size() <= (size_t(1) << 20), "a plan of more than a million sections");
    }
    return 0;
}
