// Hugging Face tokenizer.json, re-implemented with the semantics of the Rust `tokenizers` crate:
// added tokens are split out of the raw text first (leftmost-longest, with lstrip/rstrip/single_word),
// each remaining piece is normalized, pre-tokenized into words and each word is BPE-merged; the
// post-processor adds special tokens; decoding runs the decoder chain over the pieces.
//
// Regexes in tokenizer.json are written for Oniguruma; they are compiled with PCRE2 (UTF + UCP, JIT)
// after translating the few constructs whose meaning differs (\s, \h). Unicode normalisation comes from
// utf8proc. Offsets are not tracked: only ids and text are produced.
#include "tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include "json_depth.h"

namespace colibri {
namespace {

using json = nlohmann::json;

// Thrown only inside from_json and caught there: turns into a one-line Result error.
struct LoadError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& what) { throw LoadError(what); }

// A bound hit while a text is processed (regex work, growth of the text): encode turns it into an error,
// from_json (normalising the added tokens) too. Never a silently shortened result.
struct LimitError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A tokenizer.json comes with the model file, so it is hostile input; docs/FORMAT.md, "Threat model".
constexpr int kMaxComponentDepth = 16;          // Sequence nesting of normalizers, pre-tokenizers, ...
constexpr uint64_t kRegexWorkPerByte = 512;     // regex work units allowed per byte of the text encoded
constexpr uint64_t kRegexWorkBase = 1u << 20;   // ... plus this much for every text
constexpr size_t kRegexFirstWindow = 32;        // bytes a regex search may look at before it must ask for more
constexpr uint32_t kRegexFirstLimit = 64;      // backtracking allowed to a search before it must ask for more
constexpr uint32_t kRegexMatchLimit = 10'000'000;  // the most backtracking one search may do (PCRE2's default)


// ---------------------------------------------------------------------------------------------
// UTF-8
// ---------------------------------------------------------------------------------------------

inline size_t utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c >> 5) == 0x6) return 2;
    if ((c >> 4) == 0xE) return 3;
    if ((c >> 3) == 0x1E) return 4;
    return 1;
}

// Decodes the code point at s[i] of a valid UTF-8 string.
inline uint32_t decode_at(std::string_view s, size_t i, size_t* len) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    size_t n = utf8_len(p[0]);
    if (i + n > s.size()) n = 1;
    *len = n;
    switch (n) {
        case 1: return p[0];
        case 2: return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
        case 3: return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
        default: return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    }
}

inline void append_cp(std::string& out, uint32_t cp) {
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

// Length of the valid UTF-8 sequence at s[i], or 0 with *bad set to the length of the maximal
// invalid subpart (what one U+FFFD replaces, as in Rust's from_utf8_lossy and WHATWG decoders).
inline size_t valid_seq_at(std::string_view s, size_t i, size_t* bad) {
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

bool is_valid_utf8(std::string_view s) {
    size_t i = 0, bad = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
        const size_t n = valid_seq_at(s, i, &bad);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

const char kReplacementChar[] = "\xEF\xBF\xBD";

std::string utf8_lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0, bad = 0;
    while (i < s.size()) {
        const size_t n = valid_seq_at(s, i, &bad);
        if (n) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += kReplacementChar;
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

// ---------------------------------------------------------------------------------------------
// Unicode character classes (as Rust's char methods and the regex crate define them)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet (GPT-2): every byte maps to a printable code point.
// ---------------------------------------------------------------------------------------------

struct ByteAlphabet {
    std::array<uint32_t, 256> byte_to_cp{};
    std::array<std::string, 256> byte_to_utf8;
    std::array<int16_t, 512> cp_to_byte{};
    ByteAlphabet() {
        cp_to_byte.fill(-1);
        std::array<bool, 256> direct{};
        for (int b = '!'; b <= '~'; ++b) direct[b] = true;
        for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
        for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
        uint32_t n = 0;
        for (int b = 0; b < 256; ++b) byte_to_cp[b] = direct[b] ? static_cast<uint32_t>(b) : 256 + n++;
        for (int b = 0; b < 256; ++b) {
            append_cp(byte_to_utf8[b], byte_to_cp[b]);
            cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};
const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet a;
    return a;
}

std::string byte_level_encode(std::string_view s) {
    const auto& a = byte_alphabet();
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) out += a.byte_to_utf8[c];
    return out;
}

// Appends the bytes a byte-level token stands for; a token with a character outside the alphabet
// stands for its own UTF-8 (as the Rust ByteLevel decoder does).
void byte_level_decode_token(std::string_view t, std::string& out) {
    const auto& a = byte_alphabet();
    std::string bytes;
    bytes.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        size_t n;
        const uint32_t cp = decode_at(t, i, &n);
        if (cp >= a.cp_to_byte.size() || a.cp_to_byte[cp] < 0) {
            out.append(t);
            return;
        }
        bytes += static_cast<char>(a.cp_to_byte[cp]);
        i += n;
    }
    out += bytes;
}

// ---------------------------------------------------------------------------------------------
// Regex: Oniguruma-flavoured patterns on PCRE2
// ---------------------------------------------------------------------------------------------

// Oniguruma's Unicode \s: U+0009-000D, U+0085, Zl, Zp, Zs (PCRE2 also counts U+180E).
constexpr const char* kWhiteSpaceClassBody =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string translate_onig_pattern(std::string_view p) {
    std::string out;
    out.reserve(p.size() + 64);
    int depth = 0;  // character-class nesting
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char d = p[i + 1];
            if (d == 's') {
                if (depth) out += kWhiteSpaceClassBody;
                else out += std::string("[") + kWhiteSpaceClassBody + "]";
                ++i;
                continue;
            }
            if (d == 'S' && depth == 0) {
                out += std::string("[^") + kWhiteSpaceClassBody + "]";
                ++i;
                continue;
            }
            if (d == 'h') {  // Oniguruma: hexadecimal digit
                out += depth ? "0-9a-fA-F" : "[0-9a-fA-F]";
                ++i;
                continue;
            }
            if (d == 'H' && depth == 0) {
                out += "[^0-9a-fA-F]";
                ++i;
                continue;
            }
            out += c;
            out += d;
            ++i;
            continue;
        }
        if (c == '[') {
            if (depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
                const size_t end = p.find(":]", i + 2);
                if (end != std::string_view::npos) {
                    out.append(p.substr(i, end + 2 - i));
                    i = end + 1;
                    continue;
                }
            }
            ++depth;
            out += c;
            // A ']' right after '[' or '[^' is a literal.
            if (i + 1 < p.size() && p[i + 1] == '^') { out += '^'; ++i; }
            if (i + 1 < p.size() && p[i + 1] == ']') { out += "\\]"; ++i; }
            continue;
        }
        if (c == ']' && depth > 0) --depth;
        out += c;
    }
    return out;
}

struct MatchScratch {
    pcre2_match_data* md = nullptr;
    pcre2_match_context* mc = nullptr;
    pcre2_jit_stack* js = nullptr;
    uint64_t work_left = UINT64_MAX;  // regex work units left to the text being processed (RegexBudget)
    MatchScratch() {
        md = pcre2_match_data_create(1, nullptr);
        mc = pcre2_match_context_create(nullptr);
        js = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
        if (mc && js) pcre2_jit_stack_assign(mc, nullptr, js);
    }
    ~MatchScratch() {
        if (js) pcre2_jit_stack_free(js);
        if (mc) pcre2_match_context_free(mc);
        if (md) pcre2_match_data_free(md);
    }
    MatchScratch(const MatchScratch&) = delete;
    MatchScratch& operator=(const MatchScratch&) = delete;
};

MatchScratch& match_scratch() {
    thread_local MatchScratch s;
    return s;
}

// The regex work one text may cost, in proportion to its size: installed for an encode (and for the added
// tokens at load), so that a pattern which backtracks over the whole text at every position stops with an
// error after a bounded time instead of running for minutes.
class RegexBudget {
public:
    explicit RegexBudget(size_t text_bytes) : saved_(match_scratch().work_left) {
        match_scratch().work_left = kRegexWorkBase + kRegexWorkPerByte * static_cast<uint64_t>(text_bytes);
    }
    ~RegexBudget() { match_scratch().work_left = saved_; }
    RegexBudget(const RegexBudget&) = delete;
    RegexBudget& operator=(const RegexBudget&) = delete;

private:
    uint64_t saved_;
};

std::string shown_pattern(const std::string& pattern) {
    std::string shown;  // one line, and not too long
    for (char c : pattern.substr(0, 80)) shown += (c == '\n') ? std::string("\\n") : (c == '\r') ? std::string("\\r") : std::string(1, c);
    return pattern.size() > 80 ? shown + "..." : shown;
}

class Regex {
public:
    explicit Regex(const std::string& pattern, bool onig = true) {
        const std::string pat = onig ? translate_onig_pattern(pattern) : pattern;
        shown_ = shown_pattern(pattern);
        int err = 0;
        PCRE2_SIZE off = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &off, nullptr);
        if (!code_) {
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(err, buf, sizeof buf);
            std::string shown;  // keep the message on one line
            for (char c : pattern) shown += (c == '\n') ? std::string("\\n") : (c == '\r') ? std::string("\\r") : std::string(1, c);
            fail("cannot compile regex '" + shown + "': " + reinterpret_cast<const char*>(buf) + " at offset " +
                 std::to_string(off));
        }
        // Complete and partial (windowed searches, below); falls back to the interpreter when unavailable.
        pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD);
    }
    ~Regex() { pcre2_code_free(code_); }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Matches as Oniguruma's find_iter yields them (an empty match right at the end of the previous
    // match is skipped by moving one character on). `s` must be valid UTF-8. Throws LimitError when the
    // search needs more work than the budget allows or PCRE2 gives up: the text is never silently cut short.
    void find_iter(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
        MatchScratch& ms = match_scratch();
        size_t last_end = 0;
        size_t last_match_end = SIZE_MAX;
        while (last_end <= s.size()) {
            const int rc = search(s, last_end, ms);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ms.md);
            const size_t st = ov[0], en = ov[1];
            if (en < st) break;  // \K oddities
            if (st == en && en == last_match_end) {
                if (last_end >= s.size()) break;
                last_end += utf8_len(static_cast<unsigned char>(s[last_end]));
                continue;
            }
            last_end = en;
            last_match_end = en;
            out.emplace_back(st, en);
        }
    }

private:
    // One search from `from`, with the result of searching the whole of s. It first looks at a short window of
    // the text (a partial-hard match: PCRE2 says when the outcome could depend on what lies past the window)
    // with a small backtracking limit, and doubles the window or quadruples the limit while either is too small.
    // So each search costs about what it inspects and backtracks, and that is charged: a pattern that rescans
    // the rest of the text from every position, or backtracks heavily everywhere, runs out of budget quickly.
    int search(std::string_view s, size_t from, MatchScratch& ms) const {
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
        size_t window = kRegexFirstWindow;
        uint32_t limit = kRegexFirstLimit;
        while (true) {
            size_t end = from + window;
            if (end >= s.size()) {
                end = s.size();
            } else {
                while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;  // whole characters
            }
            const uint64_t cost = end - from + limit;
            if (cost > ms.work_left)
                throw LimitError("the regex '" + shown_ + "' needs more work than allowed on this text (" +
                                 std::to_string(kRegexWorkPerByte) + " units per byte): it backtracks too much");
            ms.work_left -= cost;
            const uint32_t options = PCRE2_NO_UTF_CHECK | (end < s.size() ? PCRE2_PARTIAL_HARD : 0);
            pcre2_set_match_limit(ms.mc, limit);
            int rc = pcre2_match(code_, subject, end, from, options, ms.md, ms.mc);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep recursion in JIT code: the interpreter keeps it on the heap
                rc = pcre2_match(code_, subject, end, from, options | PCRE2_NO_JIT, ms.md, ms.mc);
            if (rc == PCRE2_ERROR_PARTIAL) {
                window *= 2;
                continue;
            }
            if (rc == PCRE2_ERROR_MATCHLIMIT && limit < kRegexMatchLimit) {
                limit = std::min<uint32_t>(kRegexMatchLimit, limit * 4);
                continue;
            }
            if (rc == PCRE2_ERROR_NOMATCH && end < s.size()) {  // no match starts inside the window
                from = end;
                window = kRegexFirstWindow;
                continue;
            }
            if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(rc, buf, sizeof buf);
            throw LimitError("the regex '" + shown_ + "' failed on this text: " + reinterpret_cast<const char*>(buf));
        }
    }

    pcre2_code* code_ = nullptr;
    std::string shown_;
};

// ---------------------------------------------------------------------------------------------
// Patterns and split behaviours (tokenizers::tokenizer::pattern / NormalizedString::split)
// ---------------------------------------------------------------------------------------------

struct Seg {
    size_t b, e;
    bool m;  // a match (delimiter) or, after the behaviour is applied, a piece to remove
};

// A String or Regex pattern from tokenizer.json.
struct Pattern {
    bool is_regex = false;
    std::string literal;
    std::shared_ptr<Regex> re;

    void find_matches(std::string_view s, std::vector<Seg>& out) const {
        if (s.empty()) {
            out.push_back({0, 0, false});
            return;
        }
        if (!is_regex && literal.empty()) {
            out.push_back({0, s.size(), false});
            return;
        }
        size_t prev = 0;
        auto emit = [&](size_t st, size_t en) {
            if (prev != st) out.push_back({prev, st, false});
            out.push_back({st, en, true});
            prev = en;
        };
        if (is_regex) {
            std::vector<std::pair<size_t, size_t>> ms;
            re->find_iter(s, ms);
            for (auto [st, en] : ms) emit(st, en);
        } else {
            size_t pos = 0;
            while (pos + literal.size() <= s.size()) {  // memmem: linear whatever the literal (std::find is not)
                const void* at = memmem(s.data() + pos, s.size() - pos, literal.data(), literal.size());
                if (!at) break;
                pos = static_cast<size_t>(static_cast<const char*>(at) - s.data());
                emit(pos, pos + literal.size());
                pos += literal.size();
            }
        }
        if (prev != s.size()) out.push_back({prev, s.size(), false});
    }
};

Pattern parse_pattern(const json& j, const char* where) {
    if (!j.is_object()) fail(std::string(where) + ": pattern must be an object with String or Regex");
    Pattern p;
    if (j.contains("String") && j["String"].is_string()) {
        p.literal = j["String"].get<std::string>();
    } else if (j.contains("Regex") && j["Regex"].is_string()) {
        p.is_regex = true;
        p.re = std::make_shared<Regex>(j["Regex"].get<std::string>());
    } else {
        fail(std::string(where) + ": pattern must have a String or Regex field");
    }
    return p;
}

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
        const uint32_t cp = decode_at(s, i, &n);
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

Behavior parse_behavior(const json& j) {
    const std::string b = j.is_string() ? j.get<std::string>() : std::string();
    if (b == "Removed") return Behavior::Removed;
    if (b == "Isolated") return Behavior::Isolated;
    if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
    if (b == "MergedWithNext") return Behavior::MergedWithNext;
    if (b == "Contiguous") return Behavior::Contiguous;
    fail("unknown split behavior '" + b + "'");
}

// Rewrites `segs` into the pieces to keep; Seg::m then marks a piece to remove.
void apply_behavior(std::vector<Seg>& segs, Behavior beh) {
    std::vector<Seg> acc;
    acc.reserve(segs.size());
    bool previous = false;
    switch (beh) {
        case Behavior::Isolated:
            for (auto& s : segs) s.m = false;
            return;
        case Behavior::Removed:
            return;
        case Behavior::Contiguous:
            for (const auto& s : segs) {
                if (s.m == previous && !acc.empty()) acc.back().e = s.e;
                else acc.push_back({s.b, s.e, false});
                previous = s.m;
            }
            break;
        case Behavior::MergedWithPrevious:
            for (const auto& s : segs) {
                if (s.m && !previous && !acc.empty()) acc.back().e = s.e;
                else acc.push_back({s.b, s.e, false});
                previous = s.m;
            }
            break;
        case Behavior::MergedWithNext:
            for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
                if (it->m && !previous && !acc.empty()) acc.back().b = it->b;
                else acc.push_back({it->b, it->e, false});
                previous = it->m;
            }
            std::reverse(acc.begin(), acc.end());
            break;
    }
    segs.swap(acc);
}

// ---------------------------------------------------------------------------------------------
// Normalizers
// ---------------------------------------------------------------------------------------------

std::string utf8proc_transform(const std::string& s, int options) {
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                            static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                            static_cast<utf8proc_option_t>(options));
    if (n < 0 || !dst) {
        std::free(dst);
        return s;
    }
    std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    std::free(dst);
    return out;
}

struct Normalizer {
    enum class Type { NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, ByteLevel, Sequence };
    Type type = Type::Sequence;
    std::vector<Normalizer> children;
    Pattern pattern;
    std::string content;
    bool left = false, right = false;

    // A text may grow (NFKD, Replace, Prepend) but a chain of Replace steps must not double it 30 times over.
    void apply(std::string& s) const { apply(s, 64 * s.size() + 65536); }

    void apply(std::string& s, size_t max_bytes) const {
        switch (type) {
            case Type::NFC:
                if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
                break;
            case Type::NFD:
                if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
                break;
            case Type::NFKC:
                if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
                break;
            case Type::NFKD:
                if (!is_ascii(s)) s = utf8proc_transform(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
                break;
            case Type::Lowercase: {
                std::string out;
                out.reserve(s.size());
                for (size_t i = 0; i < s.size();) {
                    size_t n;
                    const uint32_t cp = decode_at(s, i, &n);
                    if (cp == 0x130) out += "i\xCC\x87";  // the one unconditional multi-character lowercase
                    else append_cp(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
                    i += n;
                }
                s.swap(out);
                break;
            }
            case Type::Strip: {
                size_t b = 0, e = s.size();
                if (left) {
                    while (b < e) {
                        size_t n;
                        if (!is_white_space(decode_at(s, b, &n))) break;
                        b += n;
                    }
                }
                if (right) {
                    while (e > b) {
                        size_t st = e - 1;
                        while (st > b && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80) --st;
                        size_t n;
                        if (!is_white_space(decode_at(s, st, &n))) break;
                        e = st;
                    }
                }
                s = s.substr(b, e - b);
                break;
            }
            case Type::StripAccents: {
                std::string out;
                out.reserve(s.size());
                for (size_t i = 0; i < s.size();) {
                    size_t n;
                    const uint32_t cp = decode_at(s, i, &n);
                    if (!is_mark(cp)) out.append(s, i, n);
                    i += n;
                }
                s.swap(out);
                break;
            }
            case Type::Replace: {
                std::vector<Seg> segs;
                pattern.find_matches(s, segs);
                std::string out;
                out.reserve(s.size());
                for (const auto& g : segs) {
                    if (g.m) out += content;
                    else out.append(s, g.b, g.e - g.b);
                    if (out.size() > max_bytes) throw LimitError("the normalizer's Replace grows the text past its limit");
                }
                s.swap(out);
                break;
            }
            case Type::Prepend:
                if (!s.empty()) s.insert(0, content);
                break;
            case Type::ByteLevel:
                s = byte_level_encode(s);
                break;
            case Type::Sequence:
                for (const auto& c : children) c.apply(s, max_bytes);
                break;
        }
        if (s.size() > max_bytes) throw LimitError("the normalizer grows the text past its limit (64 times its size)");
    }
};

bool get_bool(const json& j, const char* key, bool dflt) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) fail(std::string("field '") + key + "' must be a boolean");
    return it->get<bool>();
}

std::string get_string(const json& j, const char* key, const std::string& dflt) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_string()) fail(std::string("field '") + key + "' must be a string");
    return it->get<std::string>();
}

const json& get_array(const json& j, const char* key, const char* where) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) fail(std::string(where) + " needs an array '" + key + "'");
    return *it;
}

std::string type_of(const json& j, const char* what) {
    if (!j.is_object()) fail(std::string(what) + " must be an object");
    auto it = j.find("type");
    if (it == j.end() || !it->is_string()) fail(std::string(what) + " has no 'type'");
    return it->get<std::string>();
}

[[noreturn]] void too_deep(const char* what) {
    fail(std::string(what) + " Sequence nesting exceeds the depth limit of " + std::to_string(kMaxComponentDepth));
}

Normalizer parse_normalizer(const json& j, int depth = 0) {
    if (depth > kMaxComponentDepth) too_deep("normalizer");
    const std::string t = type_of(j, "normalizer");
    Normalizer n;
    using T = Normalizer::Type;
    if (t == "NFC") n.type = T::NFC;
    else if (t == "NFD") n.type = T::NFD;
    else if (t == "NFKC") n.type = T::NFKC;
    else if (t == "NFKD") n.type = T::NFKD;
    else if (t == "Lowercase") n.type = T::Lowercase;
    else if (t == "StripAccents") n.type = T::StripAccents;
    else if (t == "ByteLevel") n.type = T::ByteLevel;
    else if (t == "Strip") {
        n.type = T::Strip;
        n.left = get_bool(j, "strip_left", true);
        n.right = get_bool(j, "strip_right", true);
    } else if (t == "Replace") {
        n.type = T::Replace;
        if (!j.contains("pattern")) fail("Replace normalizer needs a pattern");
        n.pattern = parse_pattern(j["pattern"], "Replace normalizer");
        n.content = get_string(j, "content", "");
    } else if (t == "Prepend") {
        n.type = T::Prepend;
        n.content = get_string(j, "prepend", "");
    } else if (t == "Sequence") {
        n.type = T::Sequence;
        for (const auto& c : get_array(j, "normalizers", "Sequence normalizer")) n.children.push_back(parse_normalizer(c, depth + 1));
    } else {
        fail("unsupported normalizer type '" + t + "'");
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers
// ---------------------------------------------------------------------------------------------

struct Word {
    std::string s;
    bool at_start;  // begins at offset 0 of the original text (Metaspace prepend_scheme "first")
};

enum class Prepend { Always, First, Never };

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

    void apply(std::vector<Word>& words) const {
        switch (type) {
            case Type::ByteLevel:
                if (add_prefix_space)
                    for (auto& w : words)
                        if (!w.s.empty() && w.s[0] != ' ') w.s.insert(0, " ");
                if (use_regex) {
                    split_words(words, [](std::string_view s, std::vector<Seg>& o) {
                        std::vector<std::pair<size_t, size_t>> ms;
                        if (s.empty()) { o.push_back({0, 0, false}); return; }
                        gpt2_regex().find_iter(s, ms);
                        size_t prev = 0;
                        for (auto [st, en] : ms) {
                            if (prev != st) o.push_back({prev, st, false});
                            o.push_back({st, en, true});
                            prev = en;
                        }
                        if (prev != s.size()) o.push_back({prev, s.size(), false});
                    }, Behavior::Isolated);
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
                split_words(words, [](std::string_view s, std::vector<Seg>& o) {
                    if (s.empty()) { o.push_back({0, 0, false}); return; }
                    std::vector<std::pair<size_t, size_t>> ms;
                    whitespace_regex().find_iter(s, ms);
                    size_t prev = 0;
                    for (auto [st, en] : ms) {
                        if (prev != st) o.push_back({prev, st, false});
                        o.push_back({st, en, true});
                        prev = en;
                    }
                    if (prev != s.size()) o.push_back({prev, s.size(), false});
                }, Behavior::Removed, true);
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
};

uint32_t single_char(const std::string& s, const char* what) {
    if (s.empty()) fail(std::string(what) + " must be one character");
    if (!is_valid_utf8(s)) fail(std::string(what) + " is not valid UTF-8");
    size_t n;
    const uint32_t cp = decode_at(s, 0, &n);
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

PreTokenizer parse_pre_tokenizer(const json& j, int depth = 0) {
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

// ---------------------------------------------------------------------------------------------
// BPE model
// ---------------------------------------------------------------------------------------------

struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StrMap = std::unordered_map<std::string, V, StrHash, std::equal_to<>>;

// Open-addressing map from a pair of ids to (rank, merged id).
class MergeMap {
public:
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        keys_.assign(cap, kEmpty);
        vals_.assign(cap, {0, 0});
        mask_ = cap - 1;
    }
    void put(int32_t a, int32_t b, uint32_t rank, int32_t id) {
        const uint64_t k = key(a, b);
        size_t i = hash(k) & mask_;
        while (keys_[i] != kEmpty && keys_[i] != k) i = (i + 1) & mask_;
        keys_[i] = k;
        vals_[i] = {rank, id};
    }
    bool get(int32_t a, int32_t b, uint32_t* rank, int32_t* id) const {
        if (keys_.empty()) return false;
        const uint64_t k = key(a, b);
        size_t i = hash(k) & mask_;
        while (keys_[i] != kEmpty) {
            if (keys_[i] == k) {
                *rank = vals_[i].first;
                *id = vals_[i].second;
                return true;
            }
            i = (i + 1) & mask_;
        }
        return false;
    }
    size_t capacity() const { return keys_.size(); }

private:
    static constexpr uint64_t kEmpty = ~0ull;
    static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    static size_t hash(uint64_t k) {
        k ^= k >> 33;
        k *= 0xff51afd7ed558ccdULL;
        k ^= k >> 33;
        k *= 0xc4ceb9fe1a85ec53ULL;
        k ^= k >> 33;
        return static_cast<size_t>(k);
    }
    std::vector<uint64_t> keys_;
    std::vector<std::pair<uint32_t, int32_t>> vals_;
    size_t mask_ = 0;
};

// Piece -> id: open addressing over a 64-bit hash, the keys in one buffer. Loading gpt-oss's 446k merges looks up
// 1.3M pieces; with a node-based map every probe was a cache miss (a fifth of the load time).
class PieceIndex {
public:
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap <<= 1;
        rehash(cap);
    }
    // Inserts the piece, or gives an existing one the new id (a later duplicate in vocab wins, as in a JSON object).
    void assign(std::string_view key, int32_t id) {
        if ((count_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
        const uint64_t h = XXH3_64bits(key.data(), key.size());
        size_t i = h & mask_;
        for (; slots_[i].id >= 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && text(slots_[i]) == key) {
                slots_[i].id = id;
                return;
            }
        if (keys_.size() + key.size() > UINT32_MAX) throw std::length_error("the vocabulary's pieces exceed 4 GiB");
        slots_[i] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), id};
        keys_.append(key);
        ++count_;
    }
    int32_t find(std::string_view key) const {
        if (count_ == 0) return -1;
        const uint64_t h = XXH3_64bits(key.data(), key.size());
        for (size_t i = h & mask_; slots_[i].id >= 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && text(slots_[i]) == key) return slots_[i].id;
        return -1;
    }
    size_t size() const { return count_; }
    template <class F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_)
            if (s.id >= 0) f(text(s), s.id);
    }

private:
    struct Slot {
        uint64_t hash;
        uint32_t off, len;
        int32_t id;  // -1: empty
    };
    std::string_view text(const Slot& s) const { return std::string_view(keys_).substr(s.off, s.len); }
    void rehash(size_t cap) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(cap, Slot{0, 0, 0, -1});
        mask_ = cap - 1;
        for (const Slot& s : old) {
            if (s.id < 0) continue;
            size_t i = s.hash & mask_;
            while (slots_[i].id >= 0) i = (i + 1) & mask_;
            slots_[i] = s;
        }
    }
    std::vector<Slot> slots_;
    std::string keys_;
    size_t count_ = 0, mask_ = 0;
};

struct Bpe {
    PieceIndex vocab;
    std::vector<std::string> vocab_r;  // id -> piece ("" for a hole)
    std::vector<uint8_t> has_id;
    MergeMap merges;
    int32_t unk_id = -1;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
    std::optional<std::string> prefix, suffix;
    std::array<int32_t, 256> byte_ids{};

    static constexpr size_t kCacheMaxWordLen = 256;
    static constexpr size_t kCacheCapacity = 100000;
    mutable std::mutex cache_mu;
    mutable StrMap<std::vector<int32_t>> cache;

    int32_t find(std::string_view s) const { return vocab.find(s); }

    struct Symbol {
        int32_t id;
        int32_t prev, next;
        uint32_t len;
    };
    struct Merge {
        uint32_t rank;
        int32_t pos;
        int32_t new_id;
        bool operator<(const Merge& o) const {  // priority_queue pops the largest: lowest rank, then lowest pos
            if (rank != o.rank) return rank > o.rank;
            return pos > o.pos;
        }
    };

    void merge_word(std::string_view w, std::vector<int32_t>& out) const {
        std::vector<Symbol> syms;
        syms.reserve(w.size());
        auto add = [&](int32_t id, uint32_t len) {
            const int32_t n = static_cast<int32_t>(syms.size());
            if (!syms.empty()) syms.back().next = n;
            syms.push_back({id, n - 1, -1, len});
        };
        bool have_unk = false;
        uint32_t unk_len = 0;
        std::string tmp;
        for (size_t i = 0; i < w.size();) {
            const size_t n = std::min(utf8_len(static_cast<unsigned char>(w[i])), w.size() - i);
            const bool first = i == 0, last = i + n == w.size();
            std::string_view s = w.substr(i, n);
            if ((!first && prefix) || (last && suffix)) {
                tmp.clear();
                if (!first && prefix) tmp += *prefix;
                tmp.append(s);
                if (last && suffix) tmp += *suffix;
                s = tmp;
            }
            const int32_t id = find(s);
            if (id >= 0) {
                if (have_unk) {
                    add(unk_id, unk_len);
                    have_unk = false;
                }
                add(id, static_cast<uint32_t>(n));
            } else {
                bool done = false;
                if (byte_fallback) {
                    bool all = true;
                    for (unsigned char b : s)
                        if (byte_ids[b] < 0) { all = false; break; }
                    if (all) {
                        for (unsigned char b : s) add(byte_ids[b], 1);
                        done = true;
                    }
                }
                if (!done && unk_id >= 0) {
                    if (have_unk && fuse_unk) {
                        unk_len += static_cast<uint32_t>(n);
                    } else {
                        if (have_unk) add(unk_id, unk_len);
                        have_unk = true;
                        unk_len = static_cast<uint32_t>(n);
                    }
                }
            }
            i += n;
        }
        if (have_unk) add(unk_id, unk_len);

        std::priority_queue<Merge> queue;
        uint32_t rank;
        int32_t nid;
        for (size_t i = 0; i + 1 < syms.size(); ++i)
            if (merges.get(syms[i].id, syms[i + 1].id, &rank, &nid)) queue.push({rank, static_cast<int32_t>(i), nid});
        while (!queue.empty()) {
            const Merge top = queue.top();
            queue.pop();
            Symbol& cur = syms[top.pos];
            if (cur.len == 0 || cur.next < 0) continue;
            const int32_t next_pos = cur.next;
            const Symbol right = syms[next_pos];
            if (!merges.get(cur.id, right.id, &rank, &nid) || nid != top.new_id) continue;
            cur.id = top.new_id;
            cur.len += right.len;
            cur.next = right.next;
            syms[next_pos].len = 0;
            if (right.next >= 0) syms[right.next].prev = top.pos;
            if (cur.prev >= 0 && merges.get(syms[cur.prev].id, cur.id, &rank, &nid)) queue.push({rank, cur.prev, nid});
            if (cur.next >= 0 && merges.get(cur.id, syms[cur.next].id, &rank, &nid)) queue.push({rank, top.pos, nid});
        }
        for (const auto& s : syms)
            if (s.len != 0) out.push_back(s.id);
    }

    void tokenize(std::string_view w, std::vector<int32_t>& out) const {
        if (w.empty()) return;
        if (ignore_merges) {
            const int32_t id = find(w);
            if (id >= 0) {
                out.push_back(id);
                return;
            }
        }
        const bool cacheable = w.size() < kCacheMaxWordLen;
        if (cacheable) {
            std::lock_guard<std::mutex> lock(cache_mu);
            auto it = cache.find(w);
            if (it != cache.end()) {
                out.insert(out.end(), it->second.begin(), it->second.end());
                return;
            }
        }
        const size_t before = out.size();
        merge_word(w, out);
        if (cacheable) {
            std::lock_guard<std::mutex> lock(cache_mu);
            if (cache.size() < kCacheCapacity) cache.emplace(std::string(w), std::vector<int32_t>(out.begin() + before, out.end()));
        }
    }
};

int32_t json_id(const json& v, const std::string& what) {
    if (!v.is_number_integer()) fail(what + " must be an integer id");
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= 0x7FFFFFFF) fail(what + " has an out-of-range id " + std::to_string(id));  // id + 1 fits int32
    return static_cast<int32_t>(id);
}

// ---------------------------------------------------------------------------------------------
// Reading tokenizer.json: model.vocab and model.merges are streamed
// ---------------------------------------------------------------------------------------------

// model.vocab and model.merges as the parser met them. A large vocabulary (gpt-oss: 200k pieces, 446k merges) is
// most of the file; building it as JSON values first (a std::map node per piece, a vector per merge) took longer
// than everything else the tokenizer loads, so those two are collected straight from the parser's events.
struct StreamedModel {
    struct VocabEntry {
        std::string piece;
        int64_t id;
        bool integer;  // the value was an integer (else it is reported as such)
    };
    struct MergeEntry {
        enum Form : uint8_t { Line, Pair, Bad };
        size_t a = 0, a_len = 0, b = 0, b_len = 0;  // in merge_text; for the "a b" form, a is the whole line
        Form form = Bad;
    };
    bool have_vocab = false, have_merges = false;
    std::vector<VocabEntry> vocab;
    std::vector<MergeEntry> merges;
    std::string merge_text;  // every merge's text, one after the other

    std::string_view text(size_t at, size_t len) const { return std::string_view(merge_text).substr(at, len); }
};

// nlohmann::json SAX handler: builds the document as json values, except model.vocab (an object) and model.merges
// (an array), which go to a StreamedModel. The nesting (and a NUL byte) is refused by json_text_problem before parsing.
class TokenizerJsonReader {
public:
    explicit TokenizerJsonReader(StreamedModel& model) : model_(model) {}
    json& root() { return root_; }
    const std::string& error_message() const { return error_; }

    bool null() { return scalar(json(nullptr)); }
    bool boolean(bool v) { return scalar(json(v)); }
    bool number_integer(json::number_integer_t v) {
        if (mode_ == Mode::Vocab) return vocab_value(static_cast<int64_t>(v), true);
        return scalar(json(v));
    }
    bool number_unsigned(json::number_unsigned_t v) {
        if (mode_ == Mode::Vocab) return vocab_value(v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v), true);
        return scalar(json(v));
    }
    bool number_float(json::number_float_t v, const json::string_t&) { return scalar(json(v)); }
    bool binary(json::binary_t&) { return scalar(json(nullptr)); }
    bool string(json::string_t& v) {
        switch (mode_) {
            case Mode::Merges: {
                StreamedModel::MergeEntry e;
                e.form = StreamedModel::MergeEntry::Line;
                e.a = model_.merge_text.size();
                e.a_len = v.size();
                model_.merge_text += v;
                model_.merges.push_back(e);
                return true;
            }
            case Mode::MergePair: {
                StreamedModel::MergeEntry& e = model_.merges.back();
                if (pair_items_ < 2) {
                    (pair_items_ == 0 ? e.a : e.b) = model_.merge_text.size();
                    (pair_items_ == 0 ? e.a_len : e.b_len) = v.size();
                    model_.merge_text += v;
                }
                ++pair_items_;
                return true;
            }
            default: return scalar(json(std::move(v)));
        }
    }
    bool key(json::string_t& k) {
        if (mode_ == Mode::Vocab) vocab_key_ = std::move(k);
        else if (mode_ == Mode::Dom) key_ = std::move(k);
        return true;
    }
    bool start_object(std::size_t) {
        if (mode_ == Mode::Dom && at_model() && key_ == "vocab") {
            model_.have_vocab = true;
            model_.vocab.clear();
            mode_ = Mode::Vocab;
            return true;
        }
        if (mode_ != Mode::Dom) return skip_container();
        open(json::object());
        return true;
    }
    bool start_array(std::size_t) {
        if (mode_ == Mode::Dom && at_model() && key_ == "merges") {
            model_.have_merges = true;
            model_.merges.clear();
            mode_ = Mode::Merges;
            return true;
        }
        if (mode_ == Mode::Merges) {
            model_.merges.emplace_back().form = StreamedModel::MergeEntry::Pair;
            pair_items_ = 0;
            mode_ = Mode::MergePair;
            return true;
        }
        if (mode_ != Mode::Dom) return skip_container();
        open(json::array());
        return true;
    }
    bool end_object() { return close(); }
    bool end_array() {
        if (mode_ == Mode::MergePair) {
            if (pair_items_ != 2) model_.merges.back().form = StreamedModel::MergeEntry::Bad;
            mode_ = Mode::Merges;
            return true;
        }
        return close();
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
        error_ = e.what();
        return false;
    }

private:
    enum class Mode { Dom, Vocab, Merges, MergePair, Skip };

    // Inside model (the object under the root's "model" key), waiting for a member's value.
    bool at_model() const { return stack_.size() == 2 && stack_[1] == model_obj_; }

    json* add(json v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        json& parent = *stack_.back();
        if (parent.is_object()) {
            const bool is_model = stack_.size() == 1 && key_ == "model";
            if (is_model) model_ = StreamedModel{};  // a repeated model member starts afresh
            if (at_model() && (key_ == "vocab" || key_ == "merges"))  // a later plain value replaces a streamed one
                (key_ == "vocab" ? model_.have_vocab : model_.have_merges) = false;
            json& slot = parent[key_];
            slot = std::move(v);
            if (is_model) model_obj_ = slot.is_object() ? &slot : nullptr;
            return &slot;
        }
        parent.push_back(std::move(v));
        return &parent.back();
    }
    bool scalar(json v) {
        switch (mode_) {
            case Mode::Vocab: return vocab_value(0, false);
            case Mode::Merges: model_.merges.emplace_back(); return true;
            case Mode::MergePair: model_.merges.back().form = StreamedModel::MergeEntry::Bad; return true;
            case Mode::Skip: return true;
            case Mode::Dom: add(std::move(v)); return true;
        }
        return true;
    }
    bool vocab_value(int64_t id, bool integer) {
        model_.vocab.push_back({std::move(vocab_key_), id, integer});
        vocab_key_.clear();
        return true;
    }
    void open(json v) { stack_.push_back(add(std::move(v))); }
    bool close() {
        switch (mode_) {
            case Mode::Vocab:
            case Mode::Merges: mode_ = Mode::Dom; return true;
            case Mode::Skip:
                if (--skip_depth_ == 0) mode_ = skip_from_;
                return true;
            default: break;
        }
        if (!stack_.empty()) stack_.pop_back();
        return true;
    }
    // A value inside vocab or merges that is itself an object or array: wrong, and its contents are skipped.
    bool skip_container() {
        if (mode_ == Mode::Skip) {
            ++skip_depth_;
            return true;
        }
        if (mode_ == Mode::Vocab) vocab_value(0, false);
        else if (mode_ == Mode::Merges) model_.merges.emplace_back();
        else if (mode_ == Mode::MergePair) model_.merges.back().form = StreamedModel::MergeEntry::Bad;
        skip_from_ = mode_;
        skip_depth_ = 1;
        mode_ = Mode::Skip;
        return true;
    }

    StreamedModel& model_;
    json root_;
    std::vector<json*> stack_;  // the open containers of the document (their parents do not grow while they are open)
    std::string key_, vocab_key_, error_;
    Mode mode_ = Mode::Dom, skip_from_ = Mode::Dom;
    int skip_depth_ = 0;
    int pair_items_ = 0;
    const json* model_obj_ = nullptr;  // the root's "model" object (std::map nodes do not move)
};

int32_t checked_id(int64_t id, bool integer, const std::string& what) {
    if (!integer) fail(what + " must be an integer id");
    if (id < 0 || id >= 0x7FFFFFFF) fail(what + " has an out-of-range id " + std::to_string(id));  // id + 1 fits int32
    return static_cast<int32_t>(id);
}

void parse_bpe(const json& m, StreamedModel& st, Bpe& bpe) {
    if (m.contains("type") && !(m["type"].is_string() && m["type"].get<std::string>() == "BPE")) {
        const std::string t = m["type"].is_string() ? m["type"].get<std::string>() : std::string("?");
        fail("unsupported model type '" + t + "' (only BPE is supported)");
    }
    if (!st.have_vocab) fail("model has no 'vocab' object");
    if (!st.have_merges) fail("model has no 'merges' array");

    bpe.vocab.reserve(st.vocab.size());
    int32_t max_id = -1;
    for (const auto& e : st.vocab) {
        const int32_t id = checked_id(e.id, e.integer, "vocab entry '" + e.piece + "'");
        bpe.vocab.assign(e.piece, id);
        max_id = std::max(max_id, id);
    }
    st.vocab = {};
    if (static_cast<size_t>(max_id) > 4 * bpe.vocab.size() + (1u << 20))
        fail("vocab ids are far from dense (largest id " + std::to_string(max_id) + " for " +
             std::to_string(bpe.vocab.size()) + " pieces)");
    bpe.vocab_r.assign(static_cast<size_t>(max_id + 1), std::string());
    bpe.has_id.assign(static_cast<size_t>(max_id + 1), 0);
    bpe.vocab.for_each([&](std::string_view piece, int32_t id) {
        bpe.vocab_r[id] = piece;
        bpe.has_id[id] = 1;
    });

    if (m.contains("continuing_subword_prefix") && m["continuing_subword_prefix"].is_string())
        bpe.prefix = m["continuing_subword_prefix"].get<std::string>();
    if (m.contains("end_of_word_suffix") && m["end_of_word_suffix"].is_string())
        bpe.suffix = m["end_of_word_suffix"].get<std::string>();
    if (bpe.prefix && bpe.prefix->empty()) bpe.prefix.reset();
    if (bpe.suffix && bpe.suffix->empty()) bpe.suffix.reset();
    bpe.fuse_unk = get_bool(m, "fuse_unk", false);
    bpe.byte_fallback = get_bool(m, "byte_fallback", false);
    bpe.ignore_merges = get_bool(m, "ignore_merges", false);
    const std::string unk = get_string(m, "unk_token", "");
    if (!unk.empty()) bpe.unk_id = bpe.find(unk);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        bpe.byte_ids[b] = bpe.find(name);
    }

    const size_t prefix_len = bpe.prefix ? bpe.prefix->size() : 0;
    bpe.merges.reserve(st.merges.size());
    std::string merged;
    uint32_t rank = 0;
    for (const auto& e : st.merges) {
        std::string_view a, b;
        if (e.form == StreamedModel::MergeEntry::Line) {
            const std::string_view line = st.text(e.a, e.a_len);
            const size_t sp = line.find(' ');
            if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
                fail("merge " + std::to_string(rank + 1) + " ('" + std::string(line) + "') is not two tokens separated by one space");
            a = line.substr(0, sp);
            b = line.substr(sp + 1);
        } else if (e.form == StreamedModel::MergeEntry::Pair) {
            a = st.text(e.a, e.a_len);
            b = st.text(e.b, e.b_len);
        } else {
            fail("merge " + std::to_string(rank + 1) + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
        const int32_t ia = bpe.find(a), ib = bpe.find(b);
        if (ia < 0 || ib < 0) fail("merge " + std::to_string(rank + 1) + " uses a token missing from the vocabulary");
        merged.assign(a);
        if (b.size() >= prefix_len) merged.append(b.substr(prefix_len));
        const int32_t in = bpe.find(merged);
        if (in < 0) fail("merge " + std::to_string(rank + 1) + " makes a token missing from the vocabulary");
        bpe.merges.put(ia, ib, rank, in);
        ++rank;
    }
    st.merges = {};
    st.merge_text = {};
}

// ---------------------------------------------------------------------------------------------
// Added tokens
// ---------------------------------------------------------------------------------------------

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Byte trie for leftmost-longest matching of added tokens.
class Trie {
public:
    Trie() { nodes_.emplace_back(); }
    bool empty() const { return nodes_.size() == 1; }
    void add(std::string_view s, int32_t value) {
        if (s.empty()) return;
        int32_t n = 0;
        for (unsigned char c : s) {
            int32_t next = child(n, c);
            if (next < 0) {
                next = static_cast<int32_t>(nodes_.size());
                nodes_.emplace_back();
                nodes_[n].kids.emplace_back(c, next);
            }
            n = next;
        }
        nodes_[n].value = value;
        first_[static_cast<unsigned char>(s[0])] = true;
    }
    // Longest match starting at s[i]: its length, and *value; 0 when none.
    size_t longest_at(std::string_view s, size_t i, int32_t* value) const {
        if (!first_[static_cast<unsigned char>(s[i])]) return 0;
        int32_t n = 0;
        size_t best = 0;
        for (size_t j = i; j < s.size(); ++j) {
            n = child(n, static_cast<unsigned char>(s[j]));
            if (n < 0) break;
            if (nodes_[n].value >= 0) {
                best = j + 1 - i;
                *value = nodes_[n].value;
            }
        }
        return best;
    }

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> kids;
        int32_t value = -1;
    };
    int32_t child(int32_t n, unsigned char c) const {
        for (const auto& [k, v] : nodes_[n].kids)
            if (k == c) return v;
        return -1;
    }
    std::vector<Node> nodes_;
    std::array<bool, 256> first_{};
};

struct Piece {
    size_t b, e;
    int32_t token;  // index into the added tokens, -1 for text
};

uint32_t last_char(std::string_view s) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t n;
    return decode_at(s, i, &n);
}

// AddedVocabulary::find_matches.
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
            const bool stop_space = stop == s.size() || !is_word_char(decode_at(s, stop, &n));
            if (!start_space || !stop_space) continue;
        }
        if (t.lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t st = ns - 1;
                while (st > 0 && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80) --st;
                size_t n;
                if (!is_white_space(decode_at(s, st, &n))) break;
                ns = st;
            }
            start = std::max(ns, start_offset);
        }
        if (t.rstrip) {
            while (stop < s.size()) {
                size_t n;
                if (!is_white_space(decode_at(s, stop, &n))) break;
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

// ---------------------------------------------------------------------------------------------
// Post-processors
// ---------------------------------------------------------------------------------------------

struct PostProcessor {
    enum class Type { ByteLevel, Template, Bert, Sequence };
    Type type = Type::ByteLevel;
    std::vector<std::pair<bool, std::vector<int32_t>>> single;  // (is sequence A, special ids)
    std::vector<int32_t> cls, sep;
    std::vector<PostProcessor> children;

    // Special tokens around the text, not copies of it: a chain of templates repeating $A must not multiply it.
    void apply(std::vector<int32_t>& ids) const { apply(ids, 2 * ids.size() + 4096); }

    void apply(std::vector<int32_t>& ids, size_t max_ids) const {
        switch (type) {
            case Type::ByteLevel:
                break;
            case Type::Template: {
                std::vector<int32_t> out;
                out.reserve(ids.size() + 4);
                for (const auto& [is_a, special] : single) {
                    if (is_a) out.insert(out.end(), ids.begin(), ids.end());
                    else out.insert(out.end(), special.begin(), special.end());
                    if (out.size() > max_ids) throw LimitError("the post-processor multiplies the text's tokens past its limit");
                }
                ids.swap(out);
                break;
            }
            case Type::Bert:
                ids.insert(ids.begin(), cls.begin(), cls.end());
                ids.insert(ids.end(), sep.begin(), sep.end());
                break;
            case Type::Sequence:
                for (const auto& c : children) c.apply(ids, max_ids);
                break;
        }
    }
};

PostProcessor parse_post_processor(const json& j, int depth = 0) {
    if (depth > kMaxComponentDepth) too_deep("post_processor");
    const std::string t = type_of(j, "post_processor");
    PostProcessor p;
    using T = PostProcessor::Type;
    if (t == "ByteLevel") {
        p.type = T::ByteLevel;
    } else if (t == "TemplateProcessing") {
        p.type = T::Template;
        const json specials = j.contains("special_tokens") && j["special_tokens"].is_object() ? j["special_tokens"] : json::object();
        auto special_ids = [&](const std::string& name) {
            auto it = specials.find(name);
            if (it == specials.end() || !it->is_object() || !it->contains("ids") || !(*it)["ids"].is_array())
                fail("TemplateProcessing: missing special token '" + name + "'");
            std::vector<int32_t> ids;
            for (const auto& v : (*it)["ids"]) ids.push_back(json_id(v, "special token '" + name + "'"));
            return ids;
        };
        auto add_piece = [&](std::string s) {  // string form: "$A", "$B:1", "[CLS]:0"
            if (const size_t colon = s.rfind(':'); colon != std::string::npos && colon > 0) {
                const std::string tail = s.substr(colon + 1);
                if (!tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; }))
                    s = s.substr(0, colon);
            }
            if (!s.empty() && s[0] == '$') {
                const std::string rest = s.substr(1);
                if (rest == "B" || rest == "b") p.single.push_back({false, {}});  // no pair input here
                else p.single.push_back({true, {}});
            } else {
                p.single.push_back({false, special_ids(s)});
            }
        };
        if (!j.contains("single")) fail("TemplateProcessing needs 'single'");
        const json& single = j["single"];
        if (single.is_string()) {
            const std::string s = single.get<std::string>();
            size_t i = 0;
            while (i < s.size()) {
                while (i < s.size() && s[i] == ' ') ++i;
                size_t e = i;
                while (e < s.size() && s[e] != ' ') ++e;
                if (e > i) add_piece(s.substr(i, e - i));
                i = e;
            }
        } else if (single.is_array()) {
            for (const auto& piece : single) {
                if (piece.is_string()) {
                    add_piece(piece.get<std::string>());
                } else if (piece.is_object() && piece.contains("Sequence")) {
                    const std::string id = get_string(piece["Sequence"], "id", "A");
                    p.single.push_back({id == "A", {}});
                } else if (piece.is_object() && piece.contains("SpecialToken")) {
                    p.single.push_back({false, special_ids(get_string(piece["SpecialToken"], "id", ""))});
                } else {
                    fail("TemplateProcessing: unknown template piece");
                }
            }
        } else {
            fail("TemplateProcessing 'single' must be a string or an array");
        }
    } else if (t == "BertProcessing" || t == "RobertaProcessing") {
        p.type = T::Bert;
        auto pair_id = [&](const char* key) {
            if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2) fail(t + " needs '" + key + "' as [token, id]");
            return json_id(j[key][1], t + " " + key);
        };
        p.cls = {pair_id("cls")};
        p.sep = {pair_id("sep")};
    } else if (t == "Sequence") {
        p.type = T::Sequence;
        for (const auto& c : get_array(j, "processors", "Sequence post-processor")) p.children.push_back(parse_post_processor(c, depth + 1));
    } else {
        fail("unsupported post_processor type '" + t + "'");
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------------------------

std::string cleanup_spaces(std::string s) {
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) {
        if (s.find(from) == std::string::npos) continue;
        const size_t fl = std::strlen(from);
        std::string out;  // rebuilt in one pass: replacing in place moves the tail once per match
        out.reserve(s.size());
        size_t pos = 0;
        for (size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + fl) {
            out.append(s, pos, f - pos);
            out += to;
        }
        out.append(s, pos, std::string::npos);
        s.swap(out);
    }
    return s;
}

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
    void chain(std::vector<std::string>& toks, bool stream) const {
        switch (type) {
            case Type::ByteLevel: {
                std::string bytes;
                for (const auto& t : toks) byte_level_decode_token(t, bytes);
                toks.assign(1, stream ? bytes : utf8_lossy(bytes));
                break;
            }
            case Type::Metaspace:
                for (size_t i = 0; i < toks.size(); ++i) {
                    std::string out;
                    const std::string& t = toks[i];
                    for (size_t k = 0; k < t.size();) {
                        size_t n;
                        const uint32_t cp = decode_at(t, k, &n);
                        if (cp == replacement_cp) {
                            if (!(i == 0 && !stream && prepend != Prepend::Never)) out += ' ';
                        } else {
                            out.append(t, k, n);
                        }
                        k += n;
                    }
                    toks[i].swap(out);
                }
                break;
            case Type::Replace: {
                std::vector<Seg> segs;
                for (auto& t : toks) {
                    segs.clear();
                    pattern.find_matches(t, segs);
                    std::string out;
                    for (const auto& g : segs) {
                        if (g.m) out += content;
                        else out.append(t, g.b, g.e - g.b);
                    }
                    t.swap(out);
                }
                break;
            }
            case Type::ByteFallback: {
                std::vector<std::string> out;
                out.reserve(toks.size());
                std::string pending;
                auto flush = [&] {
                    if (pending.empty()) return;
                    if (stream || is_valid_utf8(pending)) out.push_back(pending);
                    else
                        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back(kReplacementChar);
                    pending.clear();
                };
                for (auto& t : toks) {
                    int byte = -1;
                    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
                        auto hex = [](char c) {
                            if (c >= '0' && c <= '9') return c - '0';
                            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
                            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
                            return -1;
                        };
                        const int h = hex(t[3]), l = hex(t[4]);
                        if (h >= 0 && l >= 0) byte = h * 16 + l;
                        else if (t[3] == '+' && l >= 0) byte = l;  // u8::from_str_radix accepts a sign
                    }
                    if (byte >= 0) {
                        pending += static_cast<char>(byte);
                    } else {
                        flush();
                        out.push_back(std::move(t));
                    }
                }
                flush();
                toks.swap(out);
                break;
            }
            case Type::Fuse: {
                std::string all;
                for (const auto& t : toks) all += t;
                toks.assign(1, all);
                break;
            }
            case Type::Strip:
                if (stream) break;
                for (auto& t : toks) {
                    std::vector<std::pair<size_t, size_t>> chars;  // (offset, length)
                    for (size_t k = 0; k < t.size();) {
                        size_t n;
                        decode_at(t, k, &n);
                        chars.emplace_back(k, n);
                        k += n;
                    }
                    size_t start_cut = 0;
                    for (size_t k = 0; k < start && k < chars.size(); ++k) {
                        size_t n;
                        if (decode_at(t, chars[k].first, &n) == strip_cp) start_cut = k + 1;
                        else break;
                    }
                    size_t stop_cut = chars.size();
                    for (size_t k = 0; k < stop && k < chars.size(); ++k) {
                        const size_t idx = chars.size() - k - 1;
                        size_t n;
                        if (decode_at(t, chars[idx].first, &n) == strip_cp) stop_cut = idx;
                        else break;
                    }
                    if (stop_cut <= start_cut) {
                        t.clear();
                    } else {
                        const size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
                        const size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
                        t = t.substr(b, e - b);
                    }
                }
                break;
            case Type::BPE:
                for (size_t i = 0; i < toks.size(); ++i) {
                    std::string& t = toks[i];
                    const std::string with = (i + 1 == toks.size() && !stream) ? "" : " ";
                    if (suffix.empty()) continue;
                    size_t pos = 0;
                    while ((pos = t.find(suffix, pos)) != std::string::npos) {
                        t.replace(pos, suffix.size(), with);
                        pos += with.size();
                    }
                }
                break;
            case Type::WordPiece:
                for (size_t i = 0; i < toks.size(); ++i) {
                    std::string& t = toks[i];
                    if (i != 0 || stream) {
                        if (!prefix.empty() && t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
                        else t.insert(0, " ");
                    }
                    if (cleanup) t = cleanup_spaces(t);
                }
                break;
            case Type::Sequence:
                for (const auto& c : children) c.chain(toks, stream);
                break;
        }
    }
};

Decoder parse_decoder(const json& j, int depth = 0) {
    if (depth > kMaxComponentDepth) too_deep("decoder");
    const std::string t = type_of(j, "decoder");
    Decoder d;
    using T = Decoder::Type;
    if (t == "ByteLevel") {
        d.type = T::ByteLevel;
    } else if (t == "Metaspace") {
        d.type = T::Metaspace;
        d.replacement_cp = single_char(get_string(j, "replacement", "\xE2\x96\x81"), "Metaspace replacement");
        d.prepend = parse_prepend_scheme(j);
    } else if (t == "Replace") {
        d.type = T::Replace;
        if (!j.contains("pattern")) fail("Replace decoder needs a pattern");
        d.pattern = parse_pattern(j["pattern"], "Replace decoder");
        // Decoding has no error to give (it streams tokens as they come), so it runs no regex: real tokenizers
        // replace a String ("▁" by " ").
        if (d.pattern.is_regex) fail("unsupported: a Replace decoder with a Regex pattern (only String)");
        d.content = get_string(j, "content", "");
    } else if (t == "ByteFallback") {
        d.type = T::ByteFallback;
    } else if (t == "Fuse") {
        d.type = T::Fuse;
    } else if (t == "Strip") {
        d.type = T::Strip;
        d.strip_cp = single_char(get_string(j, "content", " "), "Strip content");
        const auto num = [&](const char* k) -> size_t {
            if (!j.contains(k) || j[k].is_null()) return 0;
            if (!j[k].is_number_unsigned() && !j[k].is_number_integer()) fail(std::string("Strip '") + k + "' must be a number");
            return static_cast<size_t>(std::max<int64_t>(0, j[k].get<int64_t>()));
        };
        d.start = num("start");
        d.stop = num("stop");
    } else if (t == "BPEDecoder") {
        d.type = T::BPE;
        d.suffix = get_string(j, "suffix", "</w>");
    } else if (t == "WordPiece") {
        d.type = T::WordPiece;
        d.prefix = get_string(j, "prefix", "##");
        d.cleanup = get_bool(j, "cleanup", true);
    } else if (t == "Sequence") {
        d.type = T::Sequence;
        for (const auto& c : get_array(j, "decoders", "Sequence decoder")) d.children.push_back(parse_decoder(c, depth + 1));
    } else {
        fail("unsupported decoder type '" + t + "'");
    }
    return d;
}

std::optional<std::string> token_name(const json& cfg, const char* key) {
    auto it = cfg.find(key);
    if (it == cfg.end()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------

struct Tokenizer::Impl {
    Bpe bpe;
    std::vector<AddedToken> added;
    std::unordered_map<int32_t, int32_t> added_by_id;  // id -> index into `added`
    StrMap<int32_t> added_by_content;                  // content -> id
    Trie trie_raw, trie_normalized;
    std::optional<Normalizer> normalizer;
    std::optional<PreTokenizer> pre_tokenizer;
    std::optional<PostProcessor> post_processor;
    std::optional<Decoder> decoder;
    Kind kind = Kind::SentencePieceBpe;
    int32_t vocab_size = 0;
    int32_t bos = -1, eos = -1;
    bool clean_up_spaces = false;
    bool cfg_add_bos = false, cfg_add_eos = false;
    bool cfg_names_specials = false;  // tokenizer_config.json has add_bos_token or add_eos_token

    int32_t token_id(std::string_view piece) const {
        auto it = added_by_content.find(piece);
        if (it != added_by_content.end()) return it->second;
        return bpe.find(piece);
    }

    const std::string* piece(int32_t id) const {
        if (id < 0) return nullptr;
        if (auto it = added_by_id.find(id); it != added_by_id.end()) return &added[it->second].content;
        if (static_cast<size_t>(id) < bpe.has_id.size() && bpe.has_id[id]) return &bpe.vocab_r[id];
        return nullptr;
    }

    bool is_special(const std::string& content) const {
        auto it = added_by_content.find(content);
        if (it == added_by_content.end()) return false;
        auto a = added_by_id.find(it->second);
        return a != added_by_id.end() && added[a->second].special;
    }

    void encode_text(std::string_view text, std::vector<int32_t>& ids) const {
        std::vector<Piece> raw, norm;
        find_added(text, trie_raw, added, raw);
        std::vector<Word> words;
        for (const auto& p : raw) {
            if (p.token >= 0) {
                ids.push_back(added[p.token].id);
                continue;
            }
            if (p.e <= p.b) continue;
            std::string s(text.substr(p.b, p.e - p.b));
            if (normalizer) normalizer->apply(s);
            if (s.empty()) continue;
            norm.clear();
            find_added(s, trie_normalized, added, norm);
            for (const auto& q : norm) {
                if (q.token >= 0) {
                    ids.push_back(added[q.token].id);
                    continue;
                }
                if (q.e <= q.b) continue;
                words.clear();
                words.push_back({s.substr(q.b, q.e - q.b), p.b == 0 && q.b == 0});
                if (pre_tokenizer) pre_tokenizer->apply(words);
                for (const auto& w : words) bpe.tokenize(w.s, ids);
            }
        }
    }
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
    Tokenizer tok;
    Impl& im = *tok.impl_;
    std::string stage = "tokenizer.json";
    try {
        if (tokenizer_json.find_first_not_of(" \t\r\n") == std::string_view::npos)
            return error("tokenizer.json is empty");
        if (const std::string why = json_text_problem(tokenizer_json); !why.empty()) return error("tokenizer.json " + why);
        StreamedModel streamed;
        TokenizerJsonReader reader(streamed);
        if (!json::sax_parse(tokenizer_json.begin(), tokenizer_json.end(), &reader))
            return error(std::string("tokenizer.json is not valid JSON: ") + reader.error_message());
        const json& root = reader.root();
        if (!root.is_object()) return error("tokenizer.json: the top level is not an object");
        auto mit = root.find("model");
        if (mit == root.end() || !mit->is_object()) return error("tokenizer.json has no 'model' object");
        parse_bpe(*mit, streamed, im.bpe);

        auto optional_part = [&](const char* key) -> const json* {
            auto it = root.find(key);
            if (it == root.end() || it->is_null()) return nullptr;
            return &*it;
        };
        if (const json* n = optional_part("normalizer")) im.normalizer = parse_normalizer(*n);
        if (const json* p = optional_part("pre_tokenizer")) im.pre_tokenizer = parse_pre_tokenizer(*p);
        if (const json* p = optional_part("post_processor")) im.post_processor = parse_post_processor(*p);
        if (const json* d = optional_part("decoder")) im.decoder = parse_decoder(*d);

        int32_t max_id = static_cast<int32_t>(im.bpe.vocab_r.size()) - 1;
        if (const json* at = optional_part("added_tokens")) {
            if (!at->is_array()) fail("'added_tokens' must be an array");
            RegexBudget budget(tokenizer_json.size());  // normalising the added tokens runs the normalizer's regexes
            for (const auto& e : *at) {
                if (!e.is_object()) fail("an added token is not an object");
                AddedToken t;
                if (!e.contains("id")) fail("an added token has no id");
                t.id = json_id(e["id"], "added token");
                t.content = get_string(e, "content", "");
                if (t.content.empty()) continue;
                t.single_word = get_bool(e, "single_word", false);
                t.lstrip = get_bool(e, "lstrip", false);
                t.rstrip = get_bool(e, "rstrip", false);
                t.special = get_bool(e, "special", false);
                t.normalized = get_bool(e, "normalized", !t.special);
                if (auto old = im.added_by_id.find(t.id); old != im.added_by_id.end()) {
                    im.added[old->second] = t;
                } else {
                    im.added_by_id[t.id] = static_cast<int32_t>(im.added.size());
                    im.added.push_back(t);
                }
                max_id = std::max(max_id, t.id);
            }
            if (max_id >= 0 && static_cast<size_t>(max_id) > im.bpe.vocab_r.size() + 4 * im.added.size() + (1u << 20))
                fail("added token ids are far from the vocabulary (largest id " + std::to_string(max_id) + " for " +
                     std::to_string(im.bpe.vocab_r.size()) + " pieces)");
            for (size_t i = 0; i < im.added.size(); ++i) {
                const AddedToken& t = im.added[i];
                im.added_by_content[t.content] = t.id;
                if (t.normalized) {
                    std::string n = t.content;
                    if (im.normalizer) im.normalizer->apply(n);
                    im.trie_normalized.add(n, static_cast<int32_t>(i));
                } else {
                    im.trie_raw.add(t.content, static_cast<int32_t>(i));
                }
            }
        }
        im.vocab_size = max_id + 1;

        const bool byte_level = (im.pre_tokenizer && im.pre_tokenizer->contains(PreTokenizer::Type::ByteLevel)) ||
                                (im.decoder && im.decoder->contains(Decoder::Type::ByteLevel));
        im.kind = byte_level ? Kind::ByteLevelBpe : Kind::SentencePieceBpe;

        stage = "tokenizer_config.json";
        json cfg = json::object();
        if (tokenizer_config_json.find_first_not_of(" \t\r\n") != std::string_view::npos) {
            if (const std::string why = json_text_problem(tokenizer_config_json); !why.empty()) return error("tokenizer_config.json " + why);
            try {
                cfg = json::parse(tokenizer_config_json.begin(), tokenizer_config_json.end());
            } catch (const json::parse_error& e) {
                return error(std::string("tokenizer_config.json is not valid JSON: ") + e.what());
            }
            if (!cfg.is_object()) return error("tokenizer_config.json: the top level is not an object");
        }
        // bos/eos: the config's bos_token/eos_token (an explicit null means none); without one, a
        // well-known name among the added tokens (a plain vocabulary piece such as Qwen's "<s>" is no BOS).
        auto resolve = [&](const char* key, std::initializer_list<const char*> known) {
            if (auto it = cfg.find(key); it != cfg.end() && it->is_null()) return int32_t{-1};
            if (auto name = token_name(cfg, key)) {
                const int32_t id = im.token_id(*name);
                if (id >= 0) return id;
            }
            for (const char* k : known)
                if (auto it = im.added_by_content.find(std::string_view(k)); it != im.added_by_content.end()) return it->second;
            return int32_t{-1};
        };
        im.bos = resolve("bos_token", {"<s>", "<|begin_of_text|>", "<bos>"});
        im.eos = resolve("eos_token", {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"});
        auto cfg_bool = [&](const char* key) {
            auto it = cfg.find(key);
            return it != cfg.end() && it->is_boolean() && it->get<bool>();
        };
        im.clean_up_spaces = cfg_bool("clean_up_tokenization_spaces");
        im.cfg_add_bos = cfg_bool("add_bos_token");
        im.cfg_add_eos = cfg_bool("add_eos_token");
        im.cfg_names_specials = cfg.contains("add_bos_token") || cfg.contains("add_eos_token");
    } catch (const LoadError& e) {
        return error(stage + ": " + e.what());
    } catch (const std::exception& e) {
        return error(stage + ": " + e.what());
    }
    return tok;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special) const {
    std::vector<int32_t> ids;
    if (!impl_) return ids;
    const Impl& im = *impl_;
    try {
        RegexBudget budget(text.size());
        if (is_valid_utf8(text)) {
            im.encode_text(text, ids);
        } else {
            const std::string clean = utf8_lossy(text);
            im.encode_text(clean, ids);
        }
        if (add_special) {
            if (im.post_processor && !im.cfg_names_specials) {
                im.post_processor->apply(ids);
            } else {
                // As transformers: a config that names add_bos_token / add_eos_token (DeepSeek-V3's does, over a
                // ByteLevel post-processor) or a file without a post-processor gets "[bos] $A [eos]" from the flags.
                if (im.cfg_add_bos && im.bos >= 0) ids.insert(ids.begin(), im.bos);
                if (im.cfg_add_eos && im.eos >= 0) ids.push_back(im.eos);
            }
        }
    } catch (const LimitError& e) {
        return error(std::string("tokenizer: ") + e.what());
    }
    return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    if (!impl_) return {};
    const Impl& im = *impl_;
    std::vector<std::string> toks;
    toks.reserve(ids.size());
    for (int32_t id : ids) {
        const std::string* p = im.piece(id);
        if (!p) continue;  // unknown ids are dropped, as HF does
        if (skip_special && im.is_special(*p)) continue;
        toks.push_back(*p);
    }
    std::string out;
    if (im.decoder) {
        im.decoder->chain(toks, false);
        for (const auto& t : toks) out += t;
    } else {
        for (size_t i = 0; i < toks.size(); ++i) {
            if (i) out += ' ';
            out += toks[i];
        }
    }
    if (im.clean_up_spaces) out = cleanup_spaces(std::move(out));
    return out;
}

std::string Tokenizer::piece(int32_t id) const {
    if (!impl_) return {};
    const std::string* p = impl_->piece(id);
    return p ? *p : std::string();
}

std::string Tokenizer::decode_token_bytes(int32_t id) const {
    if (!impl_) return {};
    const std::string* p = impl_->piece(id);
    if (!p) return {};
    if (!impl_->decoder) return *p;
    std::vector<std::string> toks{*p};
    impl_->decoder->chain(toks, true);
    std::string out;
    for (const auto& t : toks) out += t;
    return out;
}

Tokenizer::Kind Tokenizer::kind() const { return impl_ ? impl_->kind : Kind::SentencePieceBpe; }
int32_t Tokenizer::vocab_size() const { return impl_ ? impl_->vocab_size : 0; }
int32_t Tokenizer::bos_id() const { return impl_ ? impl_->bos : -1; }
int32_t Tokenizer::eos_id() const { return impl_ ? impl_->eos : -1; }
int32_t Tokenizer::token_id(std::string_view piece) const { return impl_ ? impl_->token_id(piece) : -1; }

std::vector<int32_t> Tokenizer::end_of_turn_ids() const {
    std::vector<int32_t> ids;
    auto add = [&ids](int32_t id) {
        if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    };
    add(eos_id());
    for (const char* piece : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|return|>", "<|call|>", "<|user|>", "<|observation|>"})
        add(token_id(piece));
    return ids;
}

}  // namespace colibri
