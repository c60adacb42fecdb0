// Pre-tokenizers (the tokenizers crate's pre_tokenizers): a normalized piece of text cut into the words the model
// then tokenizes one by one (byte-level with the GPT-2 regex, Split, Metaspace, Digits, whitespace, punctuation).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/tokenizer/pattern.h"

namespace colibri::tokenizer_parts {

struct Word {
    std::string s;
    bool at_start;  // begins at offset 0 of the original text (Metaspace prepend_scheme "first")
};

enum class Prepend { Always, First, Never };

struct PreTokenizer {
    enum class Type { ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, Bert, Sequence };
    Type type = Type::Sequence;
    std::vector<PreTokenizer> children;
    // ByteLevel
    bool add_prefix_space = false, use_regex = true;
    // Split / Punctuation
    Pattern pattern;
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    // Metaspace
    std::string replacement;
    uint32_t replacement_cp = 0x2581;
    Prepend prepend = Prepend::Always;
    bool split = true;
    // Digits
    bool individual_digits = false;

    bool contains(Type t) const {
        if (type == t) return true;
        for (const auto& c : children)
            if (c.contains(t)) return true;
        return false;
    }

    void apply(std::vector<Word>& words) const;
};

PreTokenizer parse_pre_tokenizer(const json& j, int depth = 0);

// Shared with the Metaspace decoder: its prepend_scheme, and a field that must be one character.
Prepend parse_prepend_scheme(const json& j);
uint32_t single_char(const std::string& s, const char* what);

}  // namespace colibri::tokenizer_parts
