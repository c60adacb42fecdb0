#include "engine/text/tokenizer/added_tokens.h"

#include <algorithm>

#include "engine/text/tokenizer/unicode.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

namespace {

uint32_t last_char(std::string_view s) {
    const size_t i = utf8_char_start(s, s.size() - 1);
    size_t n;
    return utf8_decode_at(s, i, &n);
}

}  // namespace

void find_added(std::string_view s, const Trie& trie, const std::vector<AddedToken>& toks, std::vector<Piece>& out) {
    if (s.empty() || trie.empty()) {
        out.push_back({0, s.size(), -1});
        return;
    }
    size_t start_offset = 0;
    size_t i = 0;
    while (i < s.size()) {
        int32_t ti = -1;
        const size_t len = trie.longest_at(s, i, &ti);
        if (len == 0) {
            ++i;
            continue;
        }
        size_t start = i, stop = i + len;
        i = stop;
        const AddedToken& t = toks[ti];
        if (t.single_word) {
            const bool start_space = start == 0 || !is_word_char(last_char(s.substr(0, start)));
            size_t n;
            const bool stop_space = stop == s.size() || !is_word_char(utf8_decode_at(s, stop, &n));
            if (!start_space || !stop_space) continue;
        }
        if (t.lstrip) {
            size_t ns = start;
            while (ns > 0) {
                const size_t st = utf8_char_start(s, ns - 1);
                size_t n;
                if (!is_white_space(utf8_decode_at(s, st, &n))) break;
                ns = st;
            }
            start = std::max(ns, start_offset);
        }
        if (t.rstrip) {
            while (stop < s.size()) {
                size_t n;
                if (!is_white_space(utf8_decode_at(s, stop, &n))) break;
                stop += n;
            }
            i = std::max(i, stop);
        }
        if (start < start_offset) continue;  // cannot happen for well-formed vocabularies
        if (start_offset < start) out.push_back({start_offset, start, -1});
        out.push_back({start, stop, ti});
        start_offset = stop;
    }
    if (start_offset != s.size()) out.push_back({start_offset, s.size(), -1});
}

}  // namespace colibri::tokenizer_parts
