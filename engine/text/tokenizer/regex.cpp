#include "engine/text/tokenizer/regex.h"

#include <algorithm>

#include "engine/text/tokenizer/parse_support.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

namespace {

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

}  // namespace

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

RegexBudget::RegexBudget(size_t text_bytes) : saved_(match_scratch().work_left) {
    match_scratch().work_left = kRegexWorkBase + kRegexWorkPerByte * static_cast<uint64_t>(text_bytes);
}

RegexBudget::~RegexBudget() { match_scratch().work_left = saved_; }

namespace {

std::string shown_pattern(const std::string& pattern) {
    std::string shown;  // one line, and not too long
    for (char c : pattern.substr(0, 80)) shown += (c == '\n') ? std::string("\\n") : (c == '\r') ? std::string("\\r") : std::string(1, c);
    return pattern.size() > 80 ? shown + "..." : shown;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool onig) {
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

void Regex::find_iter(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
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
            last_end += utf8_sequence_length(static_cast<unsigned char>(s[last_end]));
            continue;
        }
        last_end = en;
        last_match_end = en;
        out.emplace_back(st, en);
    }
}

int Regex::search(std::string_view s, size_t from, MatchScratch& ms) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t window = kRegexFirstWindow;
    uint32_t limit = kRegexFirstLimit;
    while (true) {
        size_t end = from + window;
        if (end >= s.size()) {
            end = s.size();
        } else {
            while (end < s.size() && utf8_is_continuation(static_cast<unsigned char>(s[end]))) ++end;  // whole characters
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


}  // namespace colibri::tokenizer_parts
