#include "check_tokenizer.h"

#include <nlohmann/json.hpp>

#include <set>

#include "engine/base/json_depth.h"
#include "engine/file/file_rules.h"
#include "engine/text/chat_template.h"
#include "engine/text/jinja.h"
#include "engine/text/tokenizer.h"

namespace colibri::tools {

namespace {

std::string in_quotes(std::string_view s) { return "\"" + std::string(s.substr(0, 80)) + (s.size() > 80 ? "...\"" : "\""); }

// The special tokens tokenizer_config.json names: a string, or an AddedToken object with "content".
std::vector<std::pair<std::string, std::string>> named_special_tokens(const nlohmann::json& config) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
        auto it = config.find(key);
        if (it == config.end()) continue;
        if (it->is_string()) out.emplace_back(key, it->get<std::string>());
        else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
            out.emplace_back(key, (*it)["content"].get<std::string>());
    }
    return out;
}

// Special-token markers in rendered chat text: "<|...|>" without whitespace, as Qwen, OLMoE and most
// recent templates write them. A marker the vocabulary lacks would be split into ordinary pieces, so the
// model would never see the turn structure it was trained on.
std::set<std::string> special_markers(std::string_view text) {
    std::set<std::string> out;
    for (size_t at = text.find("<|"); at != std::string_view::npos; at = text.find("<|", at + 2)) {
        const size_t end = text.find("|>", at + 2);
        if (end == std::string_view::npos) break;
        const std::string_view marker = text.substr(at, end + 2 - at);
        if (marker.size() > 64 || marker.find_first_of(" \t\r\n") != std::string_view::npos) continue;
        out.emplace(marker);
    }
    return out;
}

void check_header_id(const char* what, int32_t id, uint32_t vocab_size, const Tokenizer* tok, std::vector<std::string>* problems) {
    if (id < 0) return;
    if (static_cast<uint32_t>(id) >= vocab_size) {
        problems->push_back("metadata: " + std::string(what) + " " + std::to_string(id) + " lies outside the vocabulary (" +
                            std::to_string(vocab_size) + " rows)");
    } else if (tok != nullptr && tok->piece(id).empty()) {
        problems->push_back("tokenizer: the header's " + std::string(what) + " " + std::to_string(id) + " is not a token");
    }
}

}  // namespace

void check_tokenizer(const TokenizerCheckInput& in, std::vector<std::string>* problems) {
    std::optional<Tokenizer> tok;
    if (in.tokenizer_json) {
        auto parsed = Tokenizer::from_json(*in.tokenizer_json, in.tokenizer_config.value_or(std::string_view{}));
        if (!parsed) {
            problems->push_back("tokenizer: " + parsed.message());
        } else {
            tok.emplace(std::move(parsed.value()));
            if (const std::string p = format::tokenizer_fit_problem(tok->vocab_size(), in.vocab_size); !p.empty())
                problems->push_back("tokenizer: " + p);
        }
    } else if (in.tokenizer_config) {
        problems->push_back("tokenizer config: present without a tokenizer");
    }
    const Tokenizer* t = tok ? &*tok : nullptr;
    check_header_id("bos_id", in.bos_id, in.vocab_size, t, problems);
    check_header_id("eos_id", in.eos_id, in.vocab_size, t, problems);

    // A config too deep or holding a NUL is refused unparsed; Tokenizer::from_json said why.
    if (in.tokenizer_config && json_text_problem(*in.tokenizer_config).empty()) {
        const auto config = nlohmann::json::parse(*in.tokenizer_config, nullptr, false);
        if (config.is_discarded() || !config.is_object()) {
            problems->push_back("tokenizer config: not a JSON object");
        } else if (t != nullptr) {
            for (const auto& [key, token] : named_special_tokens(config))
                if (t->token_id(token) < 0) problems->push_back("tokenizer config: " + key + " " + in_quotes(token) + " is not in the vocabulary");
        }
    }

    if (!in.chat_template) return;
    if (in.chat_template->empty()) {
        problems->push_back("chat template: empty");
        return;
    }
    try {
        jinja::parse(*in.chat_template);
    } catch (const jinja::Error& e) {
        problems->push_back("chat template: does not parse: " + e.message);
        return;
    } catch (const std::exception& e) {
        problems->push_back(std::string("chat template: does not parse: ") + e.what());
        return;
    }
    // Render what `colibri chat` renders for a first turn.
    ChatTemplateInput chat;
    chat.messages = {{"user", "Hello"}};
    chat.add_generation_prompt = true;
    if (t != nullptr && t->bos_id() >= 0) chat.bos_token = t->piece(t->bos_id());
    if (t != nullptr && t->eos_id() >= 0) chat.eos_token = t->piece(t->eos_id());
    const auto rendered = render_chat_template(*in.chat_template, chat);
    if (!rendered) {
        std::string why = rendered.message();
        if (why.rfind("chat template: ", 0) == 0) why.erase(0, 15);  // said once, in front
        problems->push_back("chat template: does not render a one-message conversation: " + why);
        return;
    }
    if (t == nullptr) return;
    for (const std::string& marker : special_markers(rendered.value()))
        if (t->token_id(marker) < 0) problems->push_back("chat template: emits " + in_quotes(marker) + ", which is not a token of the vocabulary");
}

}  // namespace colibri::tools
