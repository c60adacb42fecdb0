// The sampling a model's authors recommend, from its generation_config.json (carried into the .bin as the
// generation_config section): what `colibri chat`/`generate` and the Studio use where the user sets nothing.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "engine/base/status.h"
#include "engine/core/sampler.h"

namespace colibri {

// The fields a generation_config.json sets (absent ones stay unset). do_sample false means greedy decoding, as
// transformers runs it; the sampling fields apply when they are present, as vLLM and chat apps use them.
struct GenerationDefaults {
    std::optional<bool> do_sample;
    std::optional<float> temperature;
    std::optional<int32_t> top_k;
    std::optional<float> top_p;
    std::optional<float> min_p;
    std::optional<float> repetition_penalty;
    bool empty() const { return !do_sample && !temperature && !top_k && !top_p && !min_p && !repetition_penalty; }
    bool greedy() const { return do_sample == false || (temperature && *temperature < kGreedyBelowTemperature); }
};

// Parses generation_config.json's text (hostile: depth- and NUL-checked, each field type- and range-checked).
// Empty text gives no defaults. Errors name the field: "temperature -1 is not a finite number >= 0".
Result<GenerationDefaults> parse_generation_defaults(std::string_view json_text);

// `base` with the model's defaults applied: greedy when it says so, else each field it sets.
SamplerConfig apply_generation_defaults(SamplerConfig base, const GenerationDefaults& defaults);

// "greedy" or "temperature 0.7, top-k 20, top-p 0.8": the defaults in words ("" when there are none).
std::string describe_generation_defaults(const GenerationDefaults& defaults);

}  // namespace colibri
