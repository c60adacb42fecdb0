// Chat-template rendering: builds the context transformers' apply_chat_template passes
// (messages, tools=None, documents=None, add_generation_prompt, special tokens, extra kwargs)
// and renders it with the jinja module.
#include "engine/text/chat_template.h"

#include <nlohmann/json.hpp>

#include "engine/text/jinja.h"

namespace colibri {

Result<std::string> render_chat_template(std::string_view template_source, const ChatTemplateInput& input) {
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    for (const auto& m : input.messages) {
        nlohmann::ordered_json msg = nlohmann::ordered_json::object();
        msg["role"] = m.role;
        msg["content"] = m.content;
        messages.push_back(std::move(msg));
    }
    ctx["messages"] = std::move(messages);
    ctx["tools"] = nullptr;
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = input.add_generation_prompt;
    ctx["bos_token"] = input.bos_token;
    ctx["eos_token"] = input.eos_token;
    if (!input.extra_json.empty()) {
        nlohmann::ordered_json extra = jinja::parse_context_json(input.extra_json);
        if (extra.is_discarded() || !extra.is_object()) return error("chat template: extra_json is not a JSON object");
        for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
    }
    return jinja::render(template_source, ctx, input.now);
}

Result<std::string> render_chat_template_json(std::string_view template_source, std::string_view context_json,
                                              const std::optional<std::tm>& now) {
    nlohmann::ordered_json ctx = jinja::parse_context_json(context_json);
    if (ctx.is_discarded()) return error("chat template: the context is not valid JSON");
    if (!ctx.is_object()) return error("chat template: the context must be a JSON object");
    return jinja::render(template_source, ctx, now);
}

}  // namespace colibri
