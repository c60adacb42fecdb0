// Lexer and parser for the Jinja2 subset: jinja2's tokenizer rules (trim_blocks and lstrip_blocks on,
// '-'/'+' whitespace control, raw blocks, brace balancing inside tags) and its recursive-descent
// expression grammar, operator precedence included.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "engine/text/jinja.h"

namespace colibri::jinja {

namespace {

enum class TT { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
    TT t;
    std::string v;
    std::int64_t ival = 0;
    double fval = 0;
    int line = 1;
};

[[noreturn]] void syntax(int line, const std::string& msg) {
    fail("syntax error at line " + std::to_string(line) + ": " + msg);
}

std::string describe(const Token& t) {
    switch (t.t) {
        case TT::Data: return "template data";
        case TT::VarBegin: return "'{{'";
        case TT::VarEnd: return "end of print statement";
        case TT::BlockBegin: return "'{%'";
        case TT::BlockEnd: return "end of statement block";
        case TT::Name: return "'" + t.v + "'";
        case TT::String: return "string";
        case TT::Int: case TT::Float: return "number";
        case TT::Op: return "'" + t.v + "'";
        case TT::Eof: return "end of template";
    }
    return "token";
}

// ---------------------------------------------------------------- lexer
class Lexer {
public:
    explicit Lexer(std::string src) : s_(std::move(src)) {}

    std::vector<Token> run() {
        bool line_starting = true;
        while (pos_ < s_.size()) {
            std::size_t tag = find_tag(pos_);
            if (tag == std::string::npos) {
                emit_data(s_.substr(pos_));
                pos_ = s_.size();
                break;
            }
            std::string text = s_.substr(pos_, tag - pos_);
            char kind = s_[tag + 1];  // '{', '%' or '#'
            char sign = tag + 2 < s_.size() ? s_[tag + 2] : 0;
            bool is_raw = kind == '%' && match_raw_begin(tag);
            if (sign == '-') {
                rstrip_ws(text);
            } else if (sign != '+' && kind != '{') {
                std::size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_ws(text, l_pos)) text.resize(l_pos);
            }
            emit_data(text);
            advance_to(tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0));
            if (is_raw) {
                line_starting = lex_raw();
            } else if (kind == '#') {
                line_starting = lex_comment(tag);
            } else {
                line_starting = lex_tag(kind == '{');
            }
        }
        toks_.push_back(Token{TT::Eof, "", 0, 0, line_});
        return std::move(toks_);
    }

private:
    std::string s_;
    std::size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> toks_;

    void emit_data(const std::string& text) {
        if (text.empty()) return;
        toks_.push_back(Token{TT::Data, text, 0, 0, line_});  // line_ is advanced by advance_to()
    }
    void advance_to(std::size_t p) {
        line_ += static_cast<int>(std::count(s_.begin() + static_cast<std::ptrdiff_t>(pos_), s_.begin() + static_cast<std::ptrdiff_t>(p), '\n'));
        pos_ = p;
    }

    std::size_t find_tag(std::size_t from) const {
        for (std::size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1)) {
            if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
        }
        return std::string::npos;
    }

    // Whitespace in the sense of Python's \s / str.isspace, on UTF-8 text.
    static std::size_t ws_len_at(const std::string& s, std::size_t p) {
        unsigned char c = static_cast<unsigned char>(s[p]);
        if (c < 0x80) return py_isspace(c) ? 1 : 0;
        const std::size_t len = utf8_sequence_length(c);
        if (p + len > s.size()) return 0;
        return py_isspace(decode_utf8(std::string_view(s).substr(p, len))[0]) ? len : 0;
    }
    static bool all_ws(const std::string& s, std::size_t from) {
        std::size_t p = from;
        while (p < s.size()) {
            std::size_t l = ws_len_at(s, p);
            if (!l) return false;
            p += l;
        }
        return true;
    }
    static void rstrip_ws(std::string& s) {
        while (!s.empty()) {
            const std::size_t p = utf8_char_start(s, s.size() - 1);
            if (ws_len_at(s, p) != s.size() - p) break;
            s.resize(p);
        }
    }
    std::size_t skip_ws(std::size_t p) const {
        while (p < s_.size()) {
            std::size_t l = ws_len_at(s_, p);
            if (!l) break;
            p += l;
        }
        return p;
    }
    bool match_word(std::size_t p, std::string_view w, std::size_t& after) const {
        if (s_.compare(p, w.size(), w) != 0) return false;
        std::size_t q = p + w.size();
        if (q < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[q])) || s_[q] == '_')) return false;
        after = q;
        return true;
    }
    // `{%[-+]?\s*raw\s*(-%}|%})` at p.
    bool match_raw_begin(std::size_t p) const {
        std::size_t q = p + 2;
        if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ++q;
        q = skip_ws(q);
        std::size_t after;
        if (!match_word(q, "raw", after)) return false;
        q = skip_ws(after);
        return s_.compare(q, 2, "%}") == 0 || s_.compare(q, 3, "-%}") == 0;
    }

    bool lex_raw() {
        // pos_ is after "{%" and its sign: skip "\s*raw\s*" and the block end.
        std::size_t q = skip_ws(pos_);
        q += 3;
        q = skip_ws(q);
        if (s_[q] == '-') q = skip_ws(q + 3);
        else q += 2;
        advance_to(q);
        bool line_starting = s_[q - 1] == '\n';
        // Find "{%[-+]?\s*endraw\s*(\+%}|-%}\s*|%}\n?)".
        for (std::size_t p = s_.find("{%", pos_); p != std::string::npos; p = s_.find("{%", p + 1)) {
            std::size_t r = p + 2;
            char sign = 0;
            if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) sign = s_[r++];
            r = skip_ws(r);
            std::size_t after;
            if (!match_word(r, "endraw", after)) continue;
            r = skip_ws(after);
            std::size_t end;
            char esign = 0;
            if (s_.compare(r, 3, "+%}") == 0) { end = r + 3; esign = '+'; }
            else if (s_.compare(r, 3, "-%}") == 0) { end = skip_ws(r + 3); esign = '-'; }
            else if (s_.compare(r, 2, "%}") == 0) { end = r + 2; if (end < s_.size() && s_[end] == '\n') ++end; }
            else continue;
            (void)esign;
            std::string text = s_.substr(pos_, p - pos_);
            if (sign == '-') {
                rstrip_ws(text);
            } else if (sign != '+') {
                std::size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_ws(text, l_pos)) text.resize(l_pos);
            }
            emit_data(text);
            advance_to(end);
            return s_[end - 1] == '\n';
        }
        syntax(line_, "missing end of raw directive");
    }

    bool lex_comment(std::size_t tag) {
        std::size_t content = pos_;
        std::size_t close = s_.find("#}", content);
        if (close == std::string::npos) syntax(line_, "missing end of comment tag");
        std::size_t end = close + 2;
        if (close > content && s_[close - 1] == '-') end = skip_ws(end);
        else if (close > content && s_[close - 1] == '+') {}
        else if (end < s_.size() && s_[end] == '\n') ++end;
        (void)tag;
        advance_to(end);
        return s_[end - 1] == '\n';
    }

    bool lex_tag(bool is_var) {
        toks_.push_back(Token{is_var ? TT::VarBegin : TT::BlockBegin, "", 0, 0, line_});
        std::vector<char> stack;
        while (true) {
            advance_to(skip_ws(pos_));
            if (pos_ >= s_.size())
                syntax(line_, is_var ? "unexpected end of template, expected end of print statement '}}'"
                                     : "unexpected end of template, expected end of statement block '%}'");
            if (stack.empty()) {
                if (is_var) {
                    if (s_.compare(pos_, 3, "-}}") == 0) {
                        toks_.push_back(Token{TT::VarEnd, "", 0, 0, line_});
                        std::size_t end = skip_ws(pos_ + 3);
                        advance_to(end);
                        return s_[end - 1] == '\n';
                    }
                    if (s_.compare(pos_, 2, "}}") == 0) {
                        toks_.push_back(Token{TT::VarEnd, "", 0, 0, line_});
                        advance_to(pos_ + 2);
                        return false;
                    }
                } else {
                    if (s_.compare(pos_, 3, "-%}") == 0) {
                        toks_.push_back(Token{TT::BlockEnd, "", 0, 0, line_});
                        std::size_t end = skip_ws(pos_ + 3);
                        advance_to(end);
                        return s_[end - 1] == '\n';
                    }
                    if (s_.compare(pos_, 3, "+%}") == 0) {
                        toks_.push_back(Token{TT::BlockEnd, "", 0, 0, line_});
                        advance_to(pos_ + 3);
                        return false;
                    }
                    if (s_.compare(pos_, 2, "%}") == 0) {
                        toks_.push_back(Token{TT::BlockEnd, "", 0, 0, line_});
                        std::size_t end = pos_ + 2;
                        if (end < s_.size() && s_[end] == '\n') ++end;
                        advance_to(end);
                        return s_[end - 1] == '\n';
                    }
                }
            }
            lex_expr_token(stack);
        }
    }

    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    // `\d(_?\d)*` starting at p; returns end (p if no digit).
    std::size_t scan_digits(std::size_t p) const {
        if (p >= s_.size() || !is_digit(s_[p])) return p;
        ++p;
        while (p < s_.size()) {
            if (is_digit(s_[p])) { ++p; continue; }
            if (s_[p] == '_' && p + 1 < s_.size() && is_digit(s_[p + 1])) { p += 2; continue; }
            break;
        }
        return p;
    }

    void lex_number() {
        std::size_t p = pos_;
        auto strip_us = [](std::string x) { x.erase(std::remove(x.begin(), x.end(), '_'), x.end()); return x; };
        // based integers
        if (s_[p] == '0' && p + 2 < s_.size()) {
            char b = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[p + 1])));
            int base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 0;
            if (base) {
                std::size_t q = p + 2;
                auto ok = [&](char c) {
                    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                    if (base == 16) return is_digit(c) || (c >= 'a' && c <= 'f');
                    if (base == 8) return c >= '0' && c <= '7';
                    return c == '0' || c == '1';
                };
                std::string digits;
                while (q < s_.size()) {
                    if (s_[q] == '_' && q + 1 < s_.size() && ok(s_[q + 1])) { ++q; continue; }
                    if (!ok(s_[q])) break;
                    digits.push_back(s_[q++]);
                }
                if (!digits.empty()) {
                    std::int64_t v = 0;
                    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
                    if (r.ec != std::errc()) syntax(line_, "integer literal too large");
                    toks_.push_back(Token{TT::Int, s_.substr(p, q - p), v, 0, line_});
                    advance_to(q);
                    return;
                }
            }
        }
        std::size_t int_end = scan_digits(p);
        bool prev_dot = p > 0 && s_[p - 1] == '.';
        std::size_t q = int_end;
        bool is_float = false;
        if (!prev_dot) {
            if (q + 1 < s_.size() && s_[q] == '.' && is_digit(s_[q + 1])) { q = scan_digits(q + 1); is_float = true; }
            if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
                std::size_t r = q + 1;
                if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) ++r;
                std::size_t e = scan_digits(r);
                if (e > r) { q = e; is_float = true; }
            }
        }
        if (is_float) {
            std::string txt = strip_us(s_.substr(p, q - p));
            double d = std::strtod(txt.c_str(), nullptr);
            toks_.push_back(Token{TT::Float, txt, 0, d, line_});
            advance_to(q);
            return;
        }
        // jinja2: [1-9](_?\d)* | 0(_?0)*
        std::size_t e;
        if (s_[p] != '0') {
            e = int_end;
        } else {
            e = p + 1;
            while (e < s_.size()) {
                if (s_[e] == '0') { ++e; continue; }
                if (s_[e] == '_' && e + 1 < s_.size() && s_[e + 1] == '0') { e += 2; continue; }
                break;
            }
        }
        std::string txt = strip_us(s_.substr(p, e - p));
        std::int64_t v = 0;
        auto r = std::from_chars(txt.data(), txt.data() + txt.size(), v);
        if (r.ec != std::errc()) syntax(line_, "integer literal too large");
        toks_.push_back(Token{TT::Int, txt, v, 0, line_});
        advance_to(e);
    }

    static int hexval(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    }

    void lex_string() {
        char q = s_[pos_];
        std::size_t p = pos_ + 1;
        std::string out;
        int start_line = line_;
        char32_t pending_high = 0;
        auto put = [&](char32_t c) {
            if (pending_high) {
                if (c >= 0xDC00 && c <= 0xDFFF) {
                    append_utf8(out, 0x10000 + ((pending_high - 0xD800) << 10) + (c - 0xDC00));
                    pending_high = 0;
                    return;
                }
                syntax(start_line, "string literal contains a lone surrogate escape");
            }
            if (c >= 0xD800 && c <= 0xDBFF) { pending_high = c; return; }
            if (c >= 0xDC00 && c <= 0xDFFF) syntax(start_line, "string literal contains a lone surrogate escape");
            append_utf8(out, c);
        };
        while (true) {
            if (p >= s_.size()) syntax(start_line, "unterminated string literal");
            char c = s_[p];
            if (c == q) break;
            if (c != '\\') {
                if (pending_high) syntax(start_line, "string literal contains a lone surrogate escape");
                out.push_back(c);
                ++p;
                continue;
            }
            if (p + 1 >= s_.size()) syntax(start_line, "unterminated string literal");
            char e = s_[p + 1];
            p += 2;
            switch (e) {
                case '\\': put('\\'); break;
                case '\'': put('\''); break;
                case '"': put('"'); break;
                case 'a': put(7); break;
                case 'b': put(8); break;
                case 'f': put(12); break;
                case 'n': put('\n'); break;
                case 'r': put('\r'); break;
                case 't': put('\t'); break;
                case 'v': put(11); break;
                case '\n': break;  // line continuation
                case 'x': case 'u': case 'U': {
                    int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    char32_t v = 0;
                    for (int k = 0; k < n; ++k) {
                        int h = p < s_.size() ? hexval(s_[p]) : -1;
                        if (h < 0) syntax(start_line, std::string("truncated \\") + e + " escape in string literal");
                        v = v * 16 + static_cast<char32_t>(h);
                        ++p;
                    }
                    if (v > 0x10FFFF) syntax(start_line, "illegal Unicode character escape in string literal");
                    put(v);
                    break;
                }
                case 'N': syntax(start_line, "unsupported \\N{...} escape in string literal");
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t v = static_cast<char32_t>(e - '0');
                        for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; ++k) v = v * 8 + static_cast<char32_t>(s_[p++] - '0');
                        put(v);
                    } else {
                        if (pending_high) syntax(start_line, "string literal contains a lone surrogate escape");
                        out.push_back('\\');
                        out.push_back(e);
                    }
            }
        }
        if (pending_high) syntax(start_line, "string literal contains a lone surrogate escape");
        toks_.push_back(Token{TT::String, std::move(out), 0, 0, start_line});
        advance_to(p + 1);
    }

    void lex_expr_token(std::vector<char>& stack) {
        char c = s_[pos_];
        if (is_digit(c)) { lex_number(); return; }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t p = pos_;
            while (p < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) ++p;
            toks_.push_back(Token{TT::Name, s_.substr(pos_, p - pos_), 0, 0, line_});
            advance_to(p);
            return;
        }
        if (c == '\'' || c == '"') { lex_string(); return; }
        static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                    "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
        for (const char* op : ops) {
            std::size_t n = std::char_traits<char>::length(op);
            if (s_.compare(pos_, n, op) != 0) continue;
            if (n == 1) {
                char o = op[0];
                if (o == '(' || o == '[' || o == '{') stack.push_back(o == '(' ? ')' : o == '[' ? ']' : '}');
                else if (o == ')' || o == ']' || o == '}') {
                    if (stack.empty()) syntax(line_, std::string("unexpected '") + o + "'");
                    if (stack.back() != o) syntax(line_, std::string("unexpected '") + o + "', expected '" + stack.back() + "'");
                    stack.pop_back();
                }
            }
            toks_.push_back(Token{TT::Op, op, 0, 0, line_});
            advance_to(pos_ + n);
            return;
        }
        std::string ch;
        std::size_t p = pos_ + 1;
        while (p < s_.size() && utf8_is_continuation(static_cast<unsigned char>(s_[p]))) ++p;
        syntax(line_, "unexpected char '" + s_.substr(pos_, p - pos_) + "'");
    }
};

// ---------------------------------------------------------------- parser
const std::set<std::string> kEndTags = {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter",
                                        "endwith", "endgeneration", "endraw", "elif", "else", "endblock"};
const std::set<std::string> kUnsupportedTags = {"include", "import", "from", "extends", "block", "autoescape",
                                                "do", "print", "trans", "pluralize", "debug"};

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    std::shared_ptr<const Program> run() {
        auto prog = std::make_shared<Program>();
        std::string which;
        prog->body = parse_body({}, which, "");
        // jinja2 checks filters and tests when it compiles the parsed template: a syntax error anywhere comes first.
        if (!unknown_.empty()) syntax(unknown_.front().first, unknown_.front().second);
        return prog;
    }

private:
    std::vector<Token> t_;
    std::size_t p_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    int soft_ = 0;  // inside an if-branch or a conditional expression: unknown filters/tests fail only when evaluated (jinja2 >= 3.0)
    std::vector<std::pair<int, std::string>> unknown_;  // unknown filters/tests outside those, by line: a template error
    struct Soft {
        int& n;
        explicit Soft(int& x) : n(x) { ++n; }
        ~Soft() { --n; }
    };
    std::vector<MacroDef*> macros_;
    std::vector<Stmt*> fors_;  // for-statements whose body is being parsed

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& pp) : p(pp) {
            if (++p.depth_ > kMaxParseDepth) syntax(p.cur().line, "template nesting exceeds the depth limit of " + std::to_string(kMaxParseDepth));
        }
        ~DepthGuard() { --p.depth_; }
    };

    const Token& cur() const { return t_[p_]; }
    const Token& peek(std::size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
    Token next() { Token t = t_[p_]; if (p_ + 1 < t_.size()) ++p_; return t; }
    bool is_op(const char* op) const { return cur().t == TT::Op && cur().v == op; }
    bool is_name(const char* n) const { return cur().t == TT::Name && cur().v == n; }
    bool skip_op(const char* op) { if (is_op(op)) { next(); return true; } return false; }
    bool skip_name(const char* n) { if (is_name(n)) { next(); return true; } return false; }
    void expect_op(const char* op) {
        if (!is_op(op)) syntax(cur().line, std::string("expected '") + op + "', got " + describe(cur()));
        next();
    }
    std::string expect_name() {
        if (cur().t != TT::Name) syntax(cur().line, "expected a name, got " + describe(cur()));
        return next().v;
    }
    void expect_block_end() {
        if (cur().t != TT::BlockEnd) syntax(cur().line, "expected end of statement block, got " + describe(cur()));
        next();
    }

    static ExprP mk(EK k, int line) { auto e = std::make_unique<Expr>(); e->k = k; e->line = line; return e; }
    // Every composite node passes here once its operands are attached: a left-leaning chain (a + b + c ...,
    // x|f|g ..., y[0][0] ...) is built by a loop, not by recursion, so the parser's own depth guard cannot see
    // how tall the tree grows; its height is checked instead.
    static ExprP seal(ExprP e) {
        int h = 0;
        for (const auto& x : e->a)
            if (x) h = std::max(h, x->height);
        for (const auto& kv : e->kw)
            if (kv.second) h = std::max(h, kv.second->height);
        e->height = h + 1;
        if (e->height > kMaxParseDepth)
            syntax(e->line, "expression nesting exceeds the depth limit of " + std::to_string(kMaxParseDepth));
        return e;
    }
    static StmtP mks(SK k, int line) { auto s = std::make_unique<Stmt>(); s->k = k; s->line = line; return s; }

    // ------------------------------------------------------------ statements
    Body parse_body(const std::vector<std::string>& ends, std::string& which, const std::string& opener) {
        DepthGuard g(*this);
        Body body;
        while (true) {
            const Token& tk = cur();
            if (tk.t == TT::Eof) {
                if (ends.empty()) return body;
                std::string want;
                for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
                syntax(tk.line, "unexpected end of template: '" + opener + "' is not closed (looking for " + want + ")");
            }
            if (tk.t == TT::Data) {
                auto s = mks(SK::Output, tk.line);
                s->text = tk.v;
                next();
                body.push_back(std::move(s));
                continue;
            }
            if (tk.t == TT::VarBegin) {
                auto s = mks(SK::Print, tk.line);
                next();
                s->expr = parse_tuple(false, true, {}, false);
                if (cur().t != TT::VarEnd) syntax(cur().line, "expected end of print statement, got " + describe(cur()));
                next();
                body.push_back(std::move(s));
                continue;
            }
            if (tk.t != TT::BlockBegin) syntax(tk.line, "unexpected " + describe(tk));
            next();
            if (cur().t != TT::Name) syntax(cur().line, "tag name expected");
            std::string tag = cur().v;
            if (std::find(ends.begin(), ends.end(), tag) != ends.end()) {
                which = tag;
                next();
                return body;
            }
            body.push_back(parse_statement());
        }
    }

    StmtP parse_statement() {
        const Token tk = next();  // the tag name
        const std::string& tag = tk.v;
        if (tag == "if") return parse_if(tk.line);
        if (tag == "for") return parse_for(tk.line);
        if (tag == "set") return parse_set(tk.line);
        if (tag == "macro") return parse_macro(tk.line);
        if (tag == "call") return parse_call_block(tk.line);
        if (tag == "filter") return parse_filter_block(tk.line);
        if (tag == "with") return parse_with(tk.line);
        if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) syntax(tk.line, "'" + tag + "' outside of a loop");
            expect_block_end();
            return mks(tag == "break" ? SK::Break : SK::Continue, tk.line);
        }
        if (tag == "generation") {
            expect_block_end();
            auto s = mks(SK::Scope, tk.line);
            std::string which;
            s->body = parse_body({"endgeneration"}, which, "generation");
            expect_block_end();
            return s;
        }
        if (kEndTags.count(tag)) syntax(tk.line, "unexpected '" + tag + "' (no open block it could close)");
        if (kUnsupportedTags.count(tag)) syntax(tk.line, "unsupported tag '" + tag + "'");
        syntax(tk.line, "unknown tag '" + tag + "'");
    }

    StmtP parse_if(int line) {
        auto s = mks(SK::If, line);
        std::string which = "if";
        Soft soft(soft_);
        while (true) {
            s->conds.push_back(parse_tuple(false, false, {}, false));
            expect_block_end();
            s->bodies.push_back(parse_body({"elif", "else", "endif"}, which, "if"));
            if (which == "elif") continue;
            if (which == "else") {
                expect_block_end();
                s->else_body = parse_body({"endif"}, which, "if");
            }
            expect_block_end();
            return s;
        }
    }

    StmtP parse_for(int line) {
        auto s = mks(SK::For, line);
        s->target = parse_assign_target(false, {"in"});
        if (!skip_name("in")) syntax(cur().line, "expected 'in', got " + describe(cur()));
        s->expr = parse_tuple(false, false, {"recursive"}, false);
        if (skip_name("if")) s->cond = parse_expression(true);
        if (is_name("recursive")) syntax(cur().line, "unsupported: recursive for loops");
        expect_block_end();
        std::string which;
        ++loop_depth_;
        fors_.push_back(s.get());
        s->body = parse_body({"endfor", "else"}, which, "for");
        fors_.pop_back();
        --loop_depth_;
        if (which == "else") {
            expect_block_end();
            s->else_body = parse_body({"endfor"}, which, "for");
        }
        expect_block_end();
        return s;
    }

    StmtP parse_set(int line) {
        ExprP target = parse_assign_target(true, {});
        if (skip_op("=")) {
            auto s = mks(SK::Set, line);
            s->target = std::move(target);
            s->expr = parse_tuple(false, true, {}, false);
            expect_block_end();
            return s;
        }
        if (target->k == EK::Tuple) syntax(line, "block 'set' needs a single target");
        auto s = mks(SK::SetBlock, line);
        s->target = std::move(target);
        if (is_op("|")) s->cond = parse_filter(nullptr, false);
        expect_block_end();
        std::string which;
        s->body = parse_body({"endset"}, which, "set");
        expect_block_end();
        return s;
    }

    std::vector<std::pair<std::string, ExprP>> parse_signature() {
        std::vector<std::pair<std::string, ExprP>> params;
        expect_op("(");
        bool seen_default = false;
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            if (is_op(")")) break;
            std::string name = expect_name();
            ExprP def;
            if (skip_op("=")) { def = parse_expression(true); seen_default = true; }
            else if (seen_default) syntax(cur().line, "non-default argument follows default argument");
            params.emplace_back(std::move(name), std::move(def));
        }
        expect_op(")");
        return params;
    }

    StmtP parse_macro(int line) {
        auto s = mks(SK::Macro, line);
        s->macro = std::make_shared<MacroDef>();
        s->macro->name = expect_name();
        s->macro->params = parse_signature();
        expect_block_end();
        int saved_loop = loop_depth_;
        loop_depth_ = 0;
        macros_.push_back(s->macro.get());
        std::string which;
        s->macro->body = parse_body({"endmacro"}, which, "macro");
        macros_.pop_back();
        loop_depth_ = saved_loop;
        expect_block_end();
        return s;
    }

    StmtP parse_call_block(int line) {
        auto s = mks(SK::CallBlock, line);
        s->macro = std::make_shared<MacroDef>();
        s->macro->name = "caller";
        if (is_op("(")) s->macro->params = parse_signature();
        s->expr = parse_expression(true);
        if (s->expr->k != EK::Call) syntax(line, "expected a call expression after 'call'");
        expect_block_end();
        int saved_loop = loop_depth_;
        loop_depth_ = 0;
        macros_.push_back(s->macro.get());
        std::string which;
        s->macro->body = parse_body({"endcall"}, which, "call");
        macros_.pop_back();
        loop_depth_ = saved_loop;
        expect_block_end();
        return s;
    }

    StmtP parse_filter_block(int line) {
        auto s = mks(SK::FilterBlock, line);
        s->cond = parse_filter(nullptr, true);
        expect_block_end();
        std::string which;
        s->body = parse_body({"endfilter"}, which, "filter");
        expect_block_end();
        return s;
    }

    StmtP parse_with(int line) {
        auto s = mks(SK::With, line);
        while (cur().t != TT::BlockEnd) {
            if (!s->assigns.empty()) expect_op(",");
            std::string name = expect_name();
            expect_op("=");
            s->assigns.emplace_back(std::move(name), parse_expression(true));
        }
        expect_block_end();
        std::string which;
        s->body = parse_body({"endwith"}, which, "with");
        expect_block_end();
        return s;
    }

    // Name, `ns.attr` (with_namespace) or a tuple of those.
    ExprP parse_assign_target(bool with_namespace, const std::vector<std::string>& extra_end) {
        std::vector<ExprP> items;
        bool is_tuple = false;
        bool paren = skip_op("(");
        while (true) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra_end) || (paren && is_op(")"))) break;
            int line = cur().line;
            std::string name = expect_name();
            if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None")
                syntax(line, "can't assign to constant '" + name + "'");
            ExprP e;
            if (with_namespace && is_op(".")) {
                next();
                e = mk(EK::Getattr, line);
                auto base = mk(EK::Name, line);
                base->name = name;
                e->a.push_back(std::move(base));
                e->name = expect_name();
                e = seal(std::move(e));
            } else {
                e = mk(EK::Name, line);
                e->name = name;
            }
            items.push_back(std::move(e));
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (paren) { expect_op(")"); if (items.size() != 1) is_tuple = true; }
        if (items.empty()) syntax(cur().line, "expected an assignment target");
        if (!is_tuple) return std::move(items[0]);
        auto t = mk(EK::Tuple, items[0]->line);
        t->a = std::move(items);
        return seal(std::move(t));
    }

    // ------------------------------------------------------------ expressions
    bool is_tuple_end(const std::vector<std::string>& extra_end) const {
        const Token& tk = cur();
        if (tk.t == TT::VarEnd || tk.t == TT::BlockEnd || tk.t == TT::Eof) return true;
        if (tk.t == TT::Op && tk.v == ")") return true;
        if (tk.t == TT::Name && std::find(extra_end.begin(), extra_end.end(), tk.v) != extra_end.end()) return true;
        return false;
    }

    ExprP parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens) {
        int line = cur().line;
        std::vector<ExprP> args;
        bool is_tuple = false;
        while (true) {
            if (!args.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            if (simplified) args.push_back(parse_primary());
            else args.push_back(parse_expression(with_condexpr));
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) syntax(cur().line, "expected an expression, got " + describe(cur()));
        }
        auto t = mk(EK::Tuple, line);
        t->a = std::move(args);
        return seal(std::move(t));
    }

    ExprP parse_expression(bool with_condexpr) {
        DepthGuard g(*this);
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprP parse_condexpr() {
        const std::size_t mark = unknown_.size();
        ExprP e1 = parse_or();
        if (!is_name("if")) return e1;
        unknown_.resize(mark);  // jinja2 compiles the whole conditional expression softly, the part before 'if' too
        Soft soft(soft_);
        while (is_name("if")) {
            int line = next().line;
            ExprP cond = parse_or();
            ExprP other;
            if (skip_name("else")) {
                DepthGuard g(*this);  // `a if b else c if d else ...` recurses here
                other = parse_condexpr();
            }
            auto c = mk(EK::CondExpr, line);
            c->a.push_back(std::move(cond));
            c->a.push_back(std::move(e1));
            c->a.push_back(std::move(other));
            e1 = seal(std::move(c));
        }
        return e1;
    }

    ExprP binary(EK k, ExprP l, ExprP r, int line, std::string op = {}) {
        auto e = mk(k, line);
        e->name = std::move(op);
        e->a.push_back(std::move(l));
        e->a.push_back(std::move(r));
        return seal(std::move(e));
    }

    ExprP parse_or() {
        ExprP l = parse_and();
        while (is_name("or")) { int line = next().line; l = binary(EK::Or, std::move(l), parse_and(), line); }
        return l;
    }
    ExprP parse_and() {
        ExprP l = parse_not();
        while (is_name("and")) { int line = next().line; l = binary(EK::And, std::move(l), parse_not(), line); }
        return l;
    }
    ExprP parse_not() {
        if (is_name("not")) {
            DepthGuard g(*this);
            int line = next().line;
            auto e = mk(EK::Not, line);
            e->a.push_back(parse_not());
            return seal(std::move(e));
        }
        return parse_compare();
    }
    ExprP parse_compare() {
        int line = cur().line;
        ExprP first = parse_math1();
        std::vector<std::string> ops;
        std::vector<ExprP> rest;
        while (true) {
            const Token& tk = cur();
            if (tk.t == TT::Op && (tk.v == "==" || tk.v == "!=" || tk.v == "<" || tk.v == "<=" || tk.v == ">" || tk.v == ">=")) {
                ops.push_back(next().v);
            } else if (is_name("in")) {
                next();
                ops.push_back("in");
            } else if (is_name("not") && peek().t == TT::Name && peek().v == "in") {
                next();
                next();
                ops.push_back("notin");
            } else {
                break;
            }
            rest.push_back(parse_math1());
        }
        if (ops.empty()) return first;
        auto e = mk(EK::Compare, line);
        e->a.push_back(std::move(first));
        for (auto& r : rest) e->a.push_back(std::move(r));
        e->ops = std::move(ops);
        return seal(std::move(e));
    }
    ExprP parse_math1() {
        ExprP l = parse_concat();
        while (is_op("+") || is_op("-")) {
            Token op = next();
            l = binary(EK::Binary, std::move(l), parse_concat(), op.line, op.v);
        }
        return l;
    }
    ExprP parse_concat() {
        int line = cur().line;
        ExprP first = parse_math2();
        if (!is_op("~")) return first;
        auto e = mk(EK::Concat, line);
        e->a.push_back(std::move(first));
        while (skip_op("~")) e->a.push_back(parse_math2());
        return seal(std::move(e));
    }
    ExprP parse_math2() {
        ExprP l = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            Token op = next();
            l = binary(EK::Binary, std::move(l), parse_pow(), op.line, op.v);
        }
        return l;
    }
    ExprP parse_pow() {
        ExprP l = parse_unary(true);
        while (is_op("**")) {
            Token op = next();
            l = binary(EK::Binary, std::move(l), parse_unary(true), op.line, op.v);
        }
        return l;
    }
    ExprP parse_unary(bool with_filter) {
        DepthGuard g(*this);
        int line = cur().line;
        ExprP node;
        if (skip_op("-")) {
            node = mk(EK::Neg, line);
            node->a.push_back(parse_unary(false));
            node = seal(std::move(node));
        } else if (skip_op("+")) {
            node = mk(EK::Pos, line);
            node->a.push_back(parse_unary(false));
            node = seal(std::move(node));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprP parse_primary() {
        DepthGuard g(*this);
        const Token tk = cur();
        switch (tk.t) {
            case TT::Name: {
                next();
                auto e = mk(EK::Literal, tk.line);
                if (tk.v == "true" || tk.v == "True") { e->lit = Value::boolean(true); return e; }
                if (tk.v == "false" || tk.v == "False") { e->lit = Value::boolean(false); return e; }
                if (tk.v == "none" || tk.v == "None") { e->lit = Value::none(); return e; }
                e->k = EK::Name;
                e->name = tk.v;
                if (tk.v == "loop" && !fors_.empty()) fors_.back()->uses_loop = true;
                if (!macros_.empty()) {
                    if (tk.v == "varargs") macros_.back()->uses_varargs = true;
                    if (tk.v == "kwargs") macros_.back()->uses_kwargs = true;
                    if (tk.v == "caller") macros_.back()->uses_caller = true;
                }
                return e;
            }
            case TT::String: {
                std::string buf;
                while (cur().t == TT::String) buf += next().v;
                auto e = mk(EK::Literal, tk.line);
                e->lit = Value::string(std::move(buf));
                return e;
            }
            case TT::Int: {
                next();
                auto e = mk(EK::Literal, tk.line);
                e->lit = Value::integer(tk.ival);
                return e;
            }
            case TT::Float: {
                next();
                auto e = mk(EK::Literal, tk.line);
                e->lit = Value::real(tk.fval);
                return e;
            }
            case TT::Op:
                if (tk.v == "(") {
                    next();
                    ExprP e = parse_tuple(false, true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (tk.v == "[") {
                    next();
                    auto e = mk(EK::List, tk.line);
                    while (!is_op("]")) {
                        if (!e->a.empty()) expect_op(",");
                        if (is_op("]")) break;
                        e->a.push_back(parse_expression(true));
                    }
                    expect_op("]");
                    return seal(std::move(e));
                }
                if (tk.v == "{") {
                    next();
                    auto e = mk(EK::DictLit, tk.line);
                    while (!is_op("}")) {
                        if (!e->a.empty()) expect_op(",");
                        if (is_op("}")) break;
                        e->a.push_back(parse_expression(true));
                        expect_op(":");
                        e->a.push_back(parse_expression(true));
                    }
                    expect_op("}");
                    return seal(std::move(e));
                }
                break;
            default:
                break;
        }
        syntax(tk.line, "unexpected " + describe(tk));
    }

    ExprP parse_postfix(ExprP node) {
        while (true) {
            if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else return node;
        }
    }

    ExprP parse_filter_expr(ExprP node) {
        while (true) {
            if (is_op("|")) node = parse_filter(std::move(node), false);
            else if (is_name("is")) node = parse_test(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else return node;
        }
    }

    ExprP parse_subscript(ExprP node) {
        DepthGuard g(*this);
        Token tk = next();
        if (tk.v == ".") {
            Token at = next();
            if (at.t == TT::Name) {
                auto e = mk(EK::Getattr, tk.line);
                e->a.push_back(std::move(node));
                e->name = at.v;
                return seal(std::move(e));
            }
            if (at.t != TT::Int) syntax(at.line, "expected name or number after '.'");
            auto e = mk(EK::Getitem, tk.line);
            e->a.push_back(std::move(node));
            auto idx = mk(EK::Literal, at.line);
            idx->lit = Value::integer(at.ival);
            e->a.push_back(std::move(idx));
            return seal(std::move(e));
        }
        std::vector<ExprP> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        auto e = mk(EK::Getitem, tk.line);
        e->a.push_back(std::move(node));
        if (args.size() == 1) {
            e->a.push_back(std::move(args[0]));
        } else {
            auto t = mk(EK::Tuple, tk.line);
            t->a = std::move(args);
            e->a.push_back(seal(std::move(t)));
        }
        return seal(std::move(e));
    }

    ExprP parse_subscribed() {
        int line = cur().line;
        std::vector<ExprP> args;
        if (skip_op(":")) {
            args.push_back(nullptr);
        } else {
            ExprP node = parse_expression(true);
            if (!is_op(":")) return node;
            next();
            args.push_back(std::move(node));
        }
        if (is_op(":")) args.push_back(nullptr);
        else if (!is_op("]") && !is_op(",")) args.push_back(parse_expression(true));
        else args.push_back(nullptr);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) args.push_back(parse_expression(true));
            else args.push_back(nullptr);
        } else {
            args.push_back(nullptr);
        }
        auto e = mk(EK::Slice, line);
        e->a = std::move(args);
        return seal(std::move(e));
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        bool seen_kw = false;
        bool first = true;
        while (!is_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (is_op(")")) break;
            if (is_op("*") || is_op("**")) syntax(cur().line, "unsupported: '*args' / '**kwargs' in calls");
            if (cur().t == TT::Name && peek().t == TT::Op && peek().v == "=") {
                std::string key = next().v;
                next();
                e.kw.emplace_back(std::move(key), parse_expression(true));
                seen_kw = true;
            } else {
                if (seen_kw) syntax(cur().line, "positional argument follows keyword argument");
                e.a.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprP parse_call(ExprP node) {
        DepthGuard g(*this);
        auto e = mk(EK::Call, cur().line);
        e->a.push_back(std::move(node));
        parse_call_args(*e);
        return seal(std::move(e));
    }

    ExprP parse_filter(ExprP node, bool start_inline) {
        while (is_op("|") || start_inline) {
            if (!start_inline) next();
            start_inline = false;
            int line = cur().line;
            std::string name = expect_name();
            while (is_op(".")) { next(); name += "." + expect_name(); }
            if (!has_filter(name) && !soft_) unknown_.emplace_back(line, "unknown filter '" + name + "'");
            auto e = mk(EK::Filter, line);
            e->name = name;
            e->a.push_back(std::move(node));  // may be null (filter block / block set)
            if (is_op("(")) parse_call_args(*e);
            node = seal(std::move(e));
        }
        return node;
    }

    ExprP parse_test(ExprP node) {
        int line = next().line;  // 'is'
        bool negated = skip_name("not");
        std::string name = expect_name();
        while (is_op(".")) { next(); name += "." + expect_name(); }
        if (!has_test(name) && !soft_) unknown_.emplace_back(line, "unknown test '" + name + "'");
        auto e = mk(EK::Test, line);
        e->name = name;
        e->negated = negated;
        e->a.push_back(std::move(node));
        const Token& tk = cur();
        if (is_op("(")) {
            parse_call_args(*e);
        } else if ((tk.t == TT::Name || tk.t == TT::String || tk.t == TT::Int || tk.t == TT::Float ||
                    (tk.t == TT::Op && (tk.v == "(" || tk.v == "[" || tk.v == "{"))) &&
                   !(tk.t == TT::Name && (tk.v == "else" || tk.v == "or" || tk.v == "and"))) {
            if (is_name("is")) syntax(tk.line, "you cannot chain multiple tests with 'is'");
            ExprP arg = parse_primary();
            e->a.push_back(parse_postfix(std::move(arg)));
        }
        return seal(std::move(e));
    }
};

}  // namespace

std::shared_ptr<const Program> parse(std::string_view source) {
    if (!is_valid_utf8(source)) fail("template is not valid UTF-8");
    // jinja2 normalises every newline sequence to "\n" and drops one trailing newline.
    std::string src;
    src.reserve(source.size());
    for (std::size_t k = 0; k < source.size(); ++k) {
        if (source[k] == '\r') {
            src.push_back('\n');
            if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
        } else {
            src.push_back(source[k]);
        }
    }
    if (!src.empty() && src.back() == '\n') src.pop_back();
    Lexer lx(std::move(src));
    Parser ps(lx.run());
    return ps.run();
}

}  // namespace colibri::jinja
