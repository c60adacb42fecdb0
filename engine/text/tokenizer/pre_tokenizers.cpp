#include "engine/text/tokenizer/pre_tokenizers.h"

#include <string_view>
#include <utility>

#include "engine/text/tokenizer/byte_level.h"
#include "engine/text/tokenizer/regex.h"
#include "engine/text/tokenizer/unicode.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

namespace {

const Regex& gpt2_regex() {
    static const Regex re(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
    return re;
}

const Regex& whitespace_regex() {  // \w+|[^\w\s]+ with the regex crate's \w and \s
    static const Regex re(std::string("[\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}]+|[^\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}") +
                              kWhiteSpaceClassBody + "]+",
                          false);
    return re;
}

// The text cut at a regex's matches, the matches marked (one empty segment for an empty text).
void find_regex_matches(const Regex& re, std::string_view s, std::vector<Seg>& out) {
    if (s.empty()) {
        out.push_back({0, 0, false});
        return;
    }
    std::vector<std::pair<size_t, size_t>> ms;
    re.find_iter(s, ms);
    size_t prev = 0;
    for (auto [st, en] : ms) {
        if (prev != st) out.push_back({prev, st, false});
        out.push_back({st, en, true});
        prev = en;
    }
    if (prev != s.size()) out.push_back({prev, s.size(), false});
}

// Splits every word by the segments `find` yields, after applying `beh` (and `invert`).
template <class Find>
void split_words(std::vector<Word>& words, Find&& find, Behavior beh, bool invert = false) {
    std::vector<Word> out;
    out.reserve(words.size() * 2);
    std::vector<Seg> segs;
    for (auto& w : words) {
        segs.clear();
        find(std::string_view(w.s), segs);
        if (invert)
            for (auto& g : segs) g.m = !g.m;
        apply_behavior(segs, beh);
        for (const auto& g : segs) {
            if (g.m || g.e <= g.b) continue;
            out.push_back({w.s.substr(g.b, g.e - g.b), w.at_start && g.b == 0});
        }
    }
    words.swap(out);
}

}  // namespace

void PreTokenizer::apply(std::vector<Word>& words) const {
    switch (type) {
        case Type::ByteLevel:
            if (add_prefix_space)
                for (auto& w : words)
                    if (!w.s.empty() && w.s[0] != ' ') w.s.insert(0, " ");
            if (use_regex) {
                split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_regex_matches(gpt2_regex(), s, o); },
                            Behavior::Isolated);
            }
            for (auto& w : words) w.s = byte_level_encode(w.s);
            break;
        case Type::Split:
            split_words(words, [this](std::string_view s, std::vector<Seg>& o) { pattern.find_matches(s, o); },
                        behavior, invert);
            break;
        case Type::Metaspace:
            for (auto& w : words) {
                std::string r;
                r.reserve(w.s.size() + 8);
                for (char c : w.s) {
                    if (c == ' ') r += replacement;
                    else r += c;
                }
                const bool starts = r.compare(0, replacement.size(), replacement) == 0;
                if (!starts && (prepend == Prepend::Always || (prepend == Prepend::First && w.at_start)))
                    r.insert(0, replacement);
                w.s.swap(r);
            }
            if (split) {
                const uint32_t rc = replacement_cp;
                split_words(words, [rc](std::string_view s, std::vector<Seg>& o) {
                    find_char_matches(s, [rc](uint32_t c) { return c == rc; }, o);
                }, Behavior::MergedWithNext);
            }
            break;
        case Type::Digits:
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_char_matches(s, is_numeric, o); },
                        individual_digits ? Behavior::Isolated : Behavior::Contiguous);
            break;
        case Type::Whitespace:
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_regex_matches(whitespace_regex(), s, o); },
                        Behavior::Removed, true);
            break;
        case Type::WhitespaceSplit:
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_char_matches(s, is_white_space, o); },
                        Behavior::Removed);
            break;
        case Type::Punctuation:
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_char_matches(s, is_punctuation, o); },
                        behavior);
            break;
        case Type::Bert:
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_char_matches(s, is_white_space, o); },
                        Behavior::Removed);
            split_words(words, [](std::string_view s, std::vector<Seg>& o) { find_char_matches(s, is_punctuation, o); },
                        Behavior::Isolated);
            break;
        case Type::Sequence:
            for (const auto& c : children) c.apply(words);
            break;
    }
}

uint32_t single_char(const std::string& s, const char* what) {
    if (s.empty()) fail(std::string(what) + " must be one character");
    if (!is_valid_utf8(s)) fail(std::string(what) + " is not valid UTF-8");
    size_t n;
    const uint32_t cp = utf8_decode_at(s, 0, &n);
    if (n != s.size()) fail(std::string(what) + " must be one character");
    return cp;
}

Prepend parse_prepend_scheme(const json& j) {
    Prepend p = Prepend::Always;
    const std::string scheme = get_string(j, "prepend_scheme", "always");
    if (scheme == "always") p = Prepend::Always;
    else if (scheme == "first") p = Prepend::First;
    else if (scheme == "never") p = Prepend::Never;
    else fail("unknown Metaspace prepend_scheme '" + scheme + "'");
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() && !j["add_prefix_space"].get<bool>())
        p = Prepend::Never;
    return p;
}

PreTokenizer parse_pre_tokenizer(const json& j, int depth) {
    if (depth > kMaxComponentDepth) too_deep("pre_tokenizer");
    const std::string t = type_of(j, "pre_tokenizer");
    PreTokenizer p;
    using T = PreTokenizer::Type;
    if (t == "ByteLevel") {
        p.type = T::ByteLevel;
        p.add_prefix_space = get_bool(j, "add_prefix_space", true);
        p.use_regex = get_bool(j, "use_regex", true);
    } else if (t == "Split") {
        p.type = T::Split;
        if (!j.contains("pattern")) fail("Split pre-tokenizer needs a pattern");
        p.pattern = parse_pattern(j["pattern"], "Split pre-tokenizer");
        if (!j.contains("behavior")) fail("Split pre-tokenizer needs a behavior");
        p.behavior = parse_behavior(j["behavior"]);
        p.invert = get_bool(j, "invert", false);
    } else if (t == "Metaspace") {
        p.type = T::Metaspace;
        p.replacement = get_string(j, "replacement", "\xE2\x96\x81");
        p.replacement_cp = single_char(p.replacement, "Metaspace replacement");
        p.prepend = parse_prepend_scheme(j);
        p.split = get_bool(j, "split", true);
    } else if (t == "Digits") {
        p.type = T::Digits;
        p.individual_digits = get_bool(j, "individual_digits", false);
    } else if (t == "Whitespace") {
        p.type = T::Whitespace;
    } else if (t == "WhitespaceSplit") {
        p.type = T::WhitespaceSplit;
    } else if (t == "Punctuation") {
        p.type = T::Punctuation;
        p.behavior = j.contains("behavior") ? parse_behavior(j["behavior"]) : Behavior::Isolated;
    } else if (t == "BertPreTokenizer") {
        p.type = T::Bert;
    } else if (t == "Sequence") {
        p.type = T::Sequence;
        for (const auto& c : get_array(j, "pretokenizers", "Sequence pre-tokenizer"))
            p.children.push_back(parse_pre_tokenizer(c, depth + 1));
    } else {
        fail("unsupported pre_tokenizer type '" + t + "'");
    }
    return p;
}

}  // namespace colibri::tokenizer_parts
