// The decode loop shared by the CLI, the C API and the Studio: sample, feed back, stop on an end token.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sampler.h"
#include "session.h"

namespace colibri {

struct GenerateRequest {
    int32_t max_tokens = 128;
    std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

// Evaluates `prompt` (on top of what the session holds), then generates up to max_tokens.
// on_token is called for each new token; returning false stops early. Returns the new ids.
Result<std::vector<int32_t>> generate(Session& session, Sampler& sampler, std::span<const int32_t> prompt,
                                      const GenerateRequest& request,
                                      const std::function<bool(int32_t)>& on_token = nullptr);

// End-of-turn ids of a model: its eos id and the tokenizer's end_of_turn_ids().
std::vector<int32_t> default_stop_ids(const Model& model);

}  // namespace colibri
