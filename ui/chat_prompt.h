// A conversation rendered into prompt tokens the way `colibri chat` renders it: the model's chat template
// with a generation prompt, or "role: content" lines for a model without one.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/chat_template.h"
#include "engine/model.h"
#include "engine/status.h"

namespace colibri::studio {

Result<std::vector<int32_t>> chat_prompt_ids(const Model& model, const std::vector<ChatMessage>& messages);

}  // namespace colibri::studio
