// Patterns and split behaviours (the tokenizers crate's tokenizer::pattern and NormalizedString::split): where a
// String, a Regex or a character class matches in a text, and which pieces a split keeps.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/tokenizer/regex.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

struct Seg {
    size_t b, e;
    bool m;  // a match (delimiter) or, after the behaviour is applied, a piece to remove
};

// A String or Regex pattern from tokenizer.json.
struct Pattern {
    bool is_regex = false;
    std::string literal;
    std::shared_ptr<Regex> re;

    // The text cut into segments, the matches marked (one unmarked segment when nothing matches).
    void find_matches(std::string_view s, std::vector<Seg>& out) const;
};

Pattern parse_pattern(const json& j, const char* where);

// Matches of a character predicate: each matching character is its own segment.
template <class Pred>
void find_char_matches(std::string_view s, Pred pred, std::vector<Seg>& out) {
    if (s.empty()) {
        out.push_back({0, 0, false});
        return;
    }
    size_t last = 0;
    for (size_t i = 0; i < s.size();) {
        size_t n;
        const uint32_t cp = utf8_decode_at(s, i, &n);
        if (pred(cp)) {
            if (last < i) out.push_back({last, i, false});
            out.push_back({i, i + n, true});
            last = i + n;
        }
        i += n;
    }
    if (last < s.size()) out.push_back({last, s.size(), false});
}

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const json& j);
// Rewrites `segs` into the pieces to keep; Seg::m then marks a piece to remove.
void apply_behavior(std::vector<Seg>& segs, Behavior beh);

}  // namespace colibri::tokenizer_parts
