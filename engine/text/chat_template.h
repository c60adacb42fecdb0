// Renders a model's Jinja chat template (the subset real Mixtral, Qwen and OLMoE templates use).
// Unsupported constructs give a clear error, never a wrong rendering.
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/status.h"

namespace colibri {

struct ChatMessage {
    std::string role;
    std::string content;
};

struct ChatTemplateInput {
    std::vector<ChatMessage> messages;
    bool add_generation_prompt = true;
    std::string bos_token;
    std::string eos_token;
    // Extra top-level variables as a JSON object text (e.g. {"enable_thinking": false}); empty for none.
    std::string extra_json;
    // strftime_now's clock (gpt-oss's template writes the date into the prompt); the local time when unset.
    std::optional<std::tm> now;
};

Result<std::string> render_chat_template(std::string_view template_source, const ChatTemplateInput& input);

// General entry point: render with an arbitrary JSON context object (messages, tools, ...); `now` as above.
Result<std::string> render_chat_template_json(std::string_view template_source, std::string_view context_json,
                                              const std::optional<std::tm>& now = std::nullopt);

}  // namespace colibri
