// JSON from a model file is hostile input. nlohmann's parser is iterative and so is its destructor, but
// copying, comparing, printing or walking a parsed value recurses once per level: a document nested 150,000
// deep overflows the stack there. Every JSON the engine and tools read from a file is checked first.
#pragma once
#include <string>
#include <string_view>

namespace colibri {

inline constexpr int kMaxJsonDepth = 64;  // config.json, tokenizer.json and tokenizer_config.json nest 3-6 levels

// True when `text` nests arrays/objects deeper than max_depth. Strings are skipped; a text that is not JSON
// may pass and is left to the parser to refuse.
inline bool json_too_deep(std::string_view text, int max_depth = kMaxJsonDepth) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

// Why a JSON text read from a file is refused before it is parsed, or empty. A NUL byte is refused wherever it
// lies: nlohmann's lexer takes it for the end of the input, so `{...}\0{...}` would parse as its first half and
// the rest of the file would be silently dropped (inside a string JSON does not allow it either).
inline std::string json_text_problem(std::string_view text, int max_depth = kMaxJsonDepth) {
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        return "holds a NUL byte at offset " + std::to_string(nul) + " (JSON text cannot)";
    if (json_too_deep(text, max_depth)) return "nests deeper than " + std::to_string(max_depth) + " levels";
    return {};
}

}  // namespace colibri
