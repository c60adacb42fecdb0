#include "engine/core/chat_prompt.h"

namespace colibri {

Result<std::vector<int32_t>> chat_prompt_ids(const Model& model, const std::vector<ChatMessage>& messages) {
    const Tokenizer* tok = model.tokenizer();
    if (tok == nullptr) return error("the model has no tokenizer; give token ids instead of text");
    std::string prompt;
    if (!model.chat_template().empty()) {
        ChatTemplateInput in;
        in.messages = messages;
        in.add_generation_prompt = true;
        if (tok->bos_id() >= 0) in.bos_token = tok->piece(tok->bos_id());
        if (tok->eos_id() >= 0) in.eos_token = tok->piece(tok->eos_id());
        auto rendered = render_chat_template(model.chat_template(), in);
        if (!rendered) return rendered.status();  // its message names the chat template
        prompt = std::move(rendered.value());
    } else {
        for (const ChatMessage& m : messages) prompt += m.role + ": " + m.content + "\n";
        prompt += "assistant:";
    }
    // The template writes its own special tokens; the plain format relies on the tokenizer's (e.g. BOS).
    auto encoded = tok->encode(prompt, model.chat_template().empty());
    if (!encoded) return encoded.status();
    std::vector<int32_t> ids = std::move(encoded.value());
    if (ids.empty()) return error("the conversation encodes to no tokens");
    return ids;
}

}  // namespace colibri
