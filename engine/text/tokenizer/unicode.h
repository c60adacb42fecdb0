// Unicode character classes as Rust's char methods and the regex crate define them (the tokenizers crate's
// semantics), from utf8proc's categories.
#pragma once
#include <cstdint>

#include <utf8proc.h>

namespace colibri::tokenizer_parts {

inline bool is_white_space(uint32_t c) {  // Unicode White_Space = Rust char::is_whitespace
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

inline utf8proc_category_t category(uint32_t c) {
    return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

inline bool is_numeric(uint32_t c) {  // Nd | Nl | No
    if (c < 0x80) return c >= '0' && c <= '9';
    const auto k = category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

inline bool is_punctuation(uint32_t c) {  // ASCII punctuation or a P* category
    if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    const auto k = category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

inline bool is_mark(uint32_t c) {
    const auto k = category(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

inline bool is_word_char(uint32_t c) {  // the regex crate's Unicode \w
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return true;
    const auto k = category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) ||
           k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC;
}

}  // namespace colibri::tokenizer_parts
