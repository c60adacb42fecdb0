// Decoders (the tokenizers crate's decoders): the pieces of decoded ids turned back into text (byte-level,
// Metaspace, byte fallback, Replace, Strip, BPE suffixes, WordPiece), as a whole reply or one streamed token.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/tokenizer/pattern.h"
#include "engine/text/tokenizer/pre_tokenizers.h"

namespace colibri::tokenizer_parts {

// transformers' clean_up_tokenization: " ." -> ".", " n't" -> "n't", ...
std::string cleanup_spaces(std::string s);

struct Decoder {
    enum class Type { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, BPE, WordPiece, Sequence };
    Type type = Type::Sequence;
    std::vector<Decoder> children;
    uint32_t replacement_cp = 0x2581;
    Prepend prepend = Prepend::Always;
    Pattern pattern;
    std::string content, prefix, suffix;
    uint32_t strip_cp = ' ';
    size_t start = 0, stop = 0;
    bool cleanup = true;

    bool contains(Type t) const {
        if (type == t) return true;
        for (const auto& c : children)
            if (c.contains(t)) return true;
        return false;
    }

    // `stream`: decoding one token that follows others: raw bytes (no U+FFFD), no first-token or Strip rules.
    void chain(std::vector<std::string>& toks, bool stream) const;

private:
    void decode_byte_level(std::vector<std::string>& toks, bool stream) const;
    void decode_metaspace(std::vector<std::string>& toks, bool stream) const;
    void decode_replace(std::vector<std::string>& toks) const;
    void decode_byte_fallback(std::vector<std::string>& toks, bool stream) const;
    void decode_strip(std::vector<std::string>& toks) const;
    void decode_bpe_suffix(std::vector<std::string>& toks, bool stream) const;
    void decode_word_piece(std::vector<std::string>& toks, bool stream) const;
};

Decoder parse_decoder(const json& j, int depth = 0);

}  // namespace colibri::tokenizer_parts
