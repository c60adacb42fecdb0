// A conversation rendered into prompt tokens, the same for `colibri chat` and the Studio: the model's chat
// template with a generation prompt, or "role: content" lines for a model without one.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/model.h"
#include "engine/text/chat_template.h"

namespace colibri {

Result<std::vector<int32_t>> chat_prompt_ids(const Model& model, const std::vector<ChatMessage>& messages);

}  // namespace colibri
