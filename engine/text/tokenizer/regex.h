// Regexes of tokenizer.json: written for Oniguruma, compiled with PCRE2 (UTF + UCP, JIT) after translating the
// few constructs whose meaning differs (\s, \h). Every search is charged to the budget of the text being
// encoded, so a pattern that backtracks without bound stops with an error, never a shortened result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace colibri::tokenizer_parts {

// Oniguruma's Unicode \s: U+0009-000D, U+0085, Zl, Zp, Zs (PCRE2 also counts U+180E).
constexpr const char* kWhiteSpaceClassBody =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

struct MatchScratch;

// The regex work one text may cost, in proportion to its size: installed for an encode (and for the added
// tokens at load), so that a pattern which backtracks over the whole text at every position stops with an
// error after a bounded time instead of running for minutes.
class RegexBudget {
public:
    explicit RegexBudget(size_t text_bytes);
    ~RegexBudget();
    RegexBudget(const RegexBudget&) = delete;
    RegexBudget& operator=(const RegexBudget&) = delete;

private:
    uint64_t saved_;
};

class Regex {
public:
    // `onig`: the pattern is Oniguruma's (tokenizer.json's) and is translated first.
    explicit Regex(const std::string& pattern, bool onig = true);
    ~Regex() { pcre2_code_free(code_); }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Matches as Oniguruma's find_iter yields them (an empty match right at the end of the previous
    // match is skipped by moving one character on). `s` must be valid UTF-8. Throws LimitError when the
    // search needs more work than the budget allows or PCRE2 gives up: the text is never silently cut short.
    void find_iter(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

private:
    // One search from `from`, with the result of searching the whole of s. It first looks at a short window of
    // the text (a partial-hard match: PCRE2 says when the outcome could depend on what lies past the window)
    // with a small backtracking limit, and doubles the window or quadruples the limit while either is too small.
    // So each search costs about what it inspects and backtracks, and that is charged: a pattern that rescans
    // the rest of the text from every position, or backtracks heavily everywhere, runs out of budget quickly.
    int search(std::string_view s, size_t from, MatchScratch& ms) const;

    pcre2_code* code_ = nullptr;
    std::string shown_;
};

}  // namespace colibri::tokenizer_parts
