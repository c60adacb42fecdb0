// A plain decode loop over token ids: sample, feed back, stop on an end token. `colibri generate` and the C API's
// colibri_generate use it; conversations (colibri chat, eval, the Studio, the C API's colibri_chat_*, the server)
// go through the chat service (chat_service.h), which adds templates, prefix reuse, UTF-8 text and stop strings.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/sampler.h"
#include "engine/core/session.h"
#include "engine/core/speculation.h"

namespace colibri {

struct GenerateRequest {
    int32_t max_tokens = 128;
    std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
    // Speculative decoding (speculation.h): drafts checked in batches; the tokens are the same as without.
    Drafter* drafter = nullptr;
    SpeculationStats* speculation = nullptr;  // when given, receives the run's statistics
};

// Why generation ended.
enum class GenerateStop { StopToken, MaxTokens, Callback, ContextFull };

// Evaluates `prompt` (on top of what the session holds), then generates up to max_tokens.
// on_token is called for each new token; returning false stops early. Returns the new ids. When the context
// fills up, generation ends there like at max_tokens (ContextFull), keeping what it made; only a prompt that
// does not fit is an error. `stop`, when given, receives the reason.
Result<std::vector<int32_t>> generate(Session& session, Sampler& sampler, std::span<const int32_t> prompt,
                                      const GenerateRequest& request,
                                      const std::function<bool(int32_t)>& on_token = nullptr, GenerateStop* stop = nullptr);

// End-of-turn ids of a model: its eos id and the tokenizer's end_of_turn_ids().
std::vector<int32_t> default_stop_ids(const Model& model);

}  // namespace colibri
