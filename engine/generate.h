// One-shot generation on a session, with no conversation state: `colibri generate` and the C API's
// colibri_generate. It is the chat service's loop (engine/chat_service.h, run_reply) without a chat template
// or prefix reuse: the prompt is evaluated on top of whatever the session holds.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "chat_service.h"
#include "sampler.h"
#include "session.h"

namespace colibri {

struct GenerateRequest {
    int32_t max_tokens = 128;
    std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

// Evaluates `prompt` (on top of what the session holds), then generates up to max_tokens.
// on_token is called for each new token with the text it completes (empty for a model without a tokenizer
// and for a stop id); returning false stops early. Returns the new ids.
Result<std::vector<int32_t>> generate(Session& session, Sampler& sampler, std::span<const int32_t> prompt,
                                      const GenerateRequest& request,
                                      const std::function<bool(const TokenEvent&)>& on_token = nullptr);

}  // namespace colibri
