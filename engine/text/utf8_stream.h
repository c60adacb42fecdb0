// Streaming token bytes to a terminal: a character split across tokens (CJK, emoji in byte-level BPE) is held
// back until its last byte arrives, so partial characters are never printed.
#pragma once
#include <string>
#include <string_view>
#include <utility>

namespace colibri {

// True when s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
inline bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) { ++i; continue; }
        const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || i + len > s.size()) return false;
        char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (size_t k = 1; k < len; ++k) {
            const unsigned char cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

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
            if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back for the lead
            const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
            return need > back ? back : 0;
        }
        return 0;
    }
    std::string pending_;
};

}  // namespace colibri
