// Normalizers (the tokenizers crate's normalizers): what each piece of text between added tokens goes through
// before it is split into words: Unicode normalisation, lowercasing, stripping, replacing, prepending.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/tokenizer/pattern.h"

namespace colibri::tokenizer_parts {

struct Normalizer {
    enum class Type { NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, ByteLevel, Sequence };
    Type type = Type::Sequence;
    std::vector<Normalizer> children;
    Pattern pattern;
    std::string content;
    bool left = false, right = false;

    // A text may grow (NFKD, Replace, Prepend) but a chain of Replace steps must not double it 30 times over.
    void apply(std::string& s) const { apply(s, 64 * s.size() + 65536); }

    // Throws LimitError when the text would grow past max_bytes.
    void apply(std::string& s, size_t max_bytes) const;
};

Normalizer parse_normalizer(const json& j, int depth = 0);

}  // namespace colibri::tokenizer_parts
