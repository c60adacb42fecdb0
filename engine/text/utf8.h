// UTF-8, decoded one way for the whole engine: the tokenizer, the Jinja interpreter and streamed replies read
// characters, check text and replace bad bytes through these functions (the rules of Unicode's "well-formed
// UTF-8": no overlong forms, no surrogates, nothing past U+10FFFF).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace colibri {

inline constexpr char kUtf8Replacement[] = "\xEF\xBF\xBD";  // U+FFFD

inline bool utf8_is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Bytes of the sequence a lead byte starts, by its bit pattern alone (1 for ASCII and for a byte that
// cannot lead).
inline size_t utf8_sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead >> 5) == 0x6) return 2;
    if ((lead >> 4) == 0xE) return 3;
    if ((lead >> 3) == 0x1E) return 4;
    return 1;
}

// The code point at s[i] and its length in *len. Meant for valid UTF-8: a byte that cannot lead, or a sequence
// cut off by the end of s, is returned as itself with length 1.
inline char32_t utf8_decode_at(std::string_view s, size_t i, size_t* len) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    size_t n = utf8_sequence_length(p[0]);
    if (i + n > s.size()) n = 1;
    *len = n;
    switch (n) {
        case 1: return p[0];
        case 2: return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
        case 3: return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
        default: return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    }
}

// Where the character holding s[i] starts: i moved back over continuation bytes, never below `floor`.
inline size_t utf8_char_start(std::string_view s, size_t i, size_t floor = 0) {
    while (i > floor && utf8_is_continuation(static_cast<unsigned char>(s[i]))) --i;
    return i;
}

inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Length of the well-formed sequence at s[i], or 0 with *bad set to the length of the maximal invalid subpart
// (what one U+FFFD replaces, as in Rust's from_utf8_lossy and WHATWG decoders).
inline size_t utf8_valid_sequence_at(std::string_view s, size_t i, size_t* bad) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) need = 2;
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    else { *bad = 1; return 0; }
    size_t j = i + 1;
    for (size_t k = 0; k < need; ++k, ++j) {
        if (j >= s.size()) { *bad = j - i; return 0; }
        const auto c = static_cast<unsigned char>(s[j]);
        if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) { *bad = j - i; return 0; }
    }
    return need + 1;
}

// True when s is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view s) {
    size_t i = 0, bad = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
        const size_t n = utf8_valid_sequence_at(s, i, &bad);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

// s with every maximal invalid subpart replaced by U+FFFD.
inline std::string utf8_lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0, bad = 0;
    while (i < s.size()) {
        const size_t n = utf8_valid_sequence_at(s, i, &bad);
        if (n) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += kUtf8Replacement;
            i += bad;
        }
    }
    return out;
}

inline bool is_ascii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

// Streaming token bytes to a terminal: a character split across tokens (CJK, emoji in byte-level BPE) is held
// back until its last byte arrives, so partial characters are never printed.
class Utf8Stream {
public:
    // Appends bytes and returns what can be shown now: everything except a trailing incomplete sequence.
    std::string push(std::string_view bytes) {
        pending_.append(bytes);
        const size_t keep = incomplete_tail(pending_);
        std::string out = pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return out;
    }
    // Whatever is left at the end of a reply (an invalid tail is shown as it is).
    std::string flush() { return std::exchange(pending_, std::string()); }

private:
    // Bytes at the end that start a multi-byte sequence not yet complete (0 when the text ends cleanly).
    static size_t incomplete_tail(const std::string& s) {
        const size_t n = s.size();
        for (size_t back = 1; back <= 3 && back <= n; ++back) {
            const unsigned char c = static_cast<unsigned char>(s[n - back]);
            if (utf8_is_continuation(c)) continue;  // look further back for the lead
            const size_t need = utf8_sequence_length(c);
            return need > back ? back : 0;
        }
        return 0;
    }
    std::string pending_;
};

}  // namespace colibri
