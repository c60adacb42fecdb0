// The byte-level alphabet (GPT-2): every byte maps to a printable code point, so that a byte-level vocabulary
// spells any bytes as text.
#pragma once
#include <string>
#include <string_view>

namespace colibri::tokenizer_parts {

// Each byte of s as the code point that stands for it.
std::string byte_level_encode(std::string_view s);
// Appends the bytes a byte-level token stands for; a token with a character outside the alphabet
// stands for its own UTF-8 (as the Rust ByteLevel decoder does).
void byte_level_decode_token(std::string_view t, std::string& out);

}  // namespace colibri::tokenizer_parts
