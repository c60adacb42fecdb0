// Sanity of a model's embedded tokenizer and chat template, as `colibri chat` will use them: tokenizer.json
// parses with the engine's tokenizer and fits the embedding, the special tokens the header and
// tokenizer_config.json name exist, and the chat template parses and renders with the engine's Jinja and
// emits only special-token markers that are single tokens.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace colibri::tools {

struct TokenizerCheckInput {
    std::optional<std::string_view> tokenizer_json;    // absent when the file has no such section
    std::optional<std::string_view> tokenizer_config;
    std::optional<std::string_view> chat_template;
    uint32_t vocab_size = 0;                           // rows of the embedding (hyper-parameters)
    int32_t bos_id = -1;                               // from the header
    int32_t eos_id = -1;
};

// Appends one line per problem, each starting with "tokenizer", "tokenizer config", "chat template" or
// "metadata" (for the header's token ids).
void check_tokenizer(const TokenizerCheckInput& in, std::vector<std::string>* problems);

}  // namespace colibri::tools
