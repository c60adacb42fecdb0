// jinja2's builtin filters and tests, the Python str/dict/list methods templates call, and the
// globals transformers provides (range, namespace, dict, joiner, raise_exception, strftime_now).
// Modifying methods (list.append, dict.update, ...) are refused as in ImmutableSandboxedEnvironment.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <utf8proc.h>

#include "engine/text/jinja.h"

namespace colibri::jinja {

namespace {

// ---------------------------------------------------------------- argument binding
struct Bound {
    std::vector<std::optional<Value>> v;
    const Value* get(std::size_t k) const { return v[k] ? &*v[k] : nullptr; }
    bool has(std::size_t k) const { return v[k].has_value() && !v[k]->is_none(); }
};

Bound bind(const std::string& what, Args& a, std::initializer_list<const char*> names, bool kw_ok = true) {
    Bound b;
    b.v.resize(names.size());
    if (a.pos.size() > names.size())
        fail(what + " takes at most " + std::to_string(names.size()) + " argument(s) (" + std::to_string(a.pos.size()) + " given)");
    for (std::size_t k = 0; k < a.pos.size(); ++k) b.v[k] = a.pos[k];
    for (auto& kv : a.kw) {
        if (!kw_ok) fail(what + " takes no keyword arguments");
        std::size_t k = 0;
        for (const char* n : names) {
            if (kv.first == n) break;
            ++k;
        }
        if (k == names.size()) fail(what + " got an unexpected keyword argument '" + kv.first + "'");
        if (b.v[k]) fail(what + " got multiple values for argument '" + kv.first + "'");
        b.v[k] = kv.second;
    }
    return b;
}

std::int64_t int_arg(const Value* v, std::int64_t def, const std::string& what) {
    if (!v || v->is_none()) return def;
    if (v->kind == Kind::Int) return v->i;
    if (v->kind == Kind::Bool) return v->b;
    if (v->is_undefined()) fail_undefined(*v);
    if (v->kind == Kind::BigInt) fail(what + ": unsupported: an integer beyond 64 bits");
    fail(what + ": expected an integer, got " + kind_name(*v));
}

bool bool_arg(const Value* v, bool def) { return v ? truthy(*v) : def; }

std::string str_arg(const Value* v, const std::string& def, const std::string& what) {
    if (!v) return def;
    if (v->is_string()) return v->s;
    if (v->is_undefined()) fail_undefined(*v);
    fail(what + ": expected a string, got " + kind_name(*v));
}

Value make_gen(std::vector<Value> items) {
    Value v = Value::make_list(std::move(items));
    v.gen = true;
    return v;
}

// environment.getitem on each dotted part (integers index), as make_attrgetter does.
Value attr_path(Interp& in, Value item, const Value& attribute) {
    if (attribute.kind == Kind::Int) return in.getitem(item, attribute);
    std::string path = to_str(attribute);
    std::size_t pos = 0;
    while (true) {
        std::size_t dot = path.find('.', pos);
        std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        item = in.getitem(item, digits ? Value::integer(std::stoll(part)) : Value::string(part));
        if (dot == std::string::npos) return item;
        pos = dot + 1;
    }
}

Value lower_if_string(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.s));
    return v;
}

std::int64_t length_of(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return 0;
        case Kind::String: return static_cast<std::int64_t>(utf8_length(v.s));
        case Kind::List: case Kind::Tuple:
            if (v.gen) fail("object of type 'generator' has no len()");
            return static_cast<std::int64_t>(v.list->items.size());
        case Kind::Dict: return static_cast<std::int64_t>(v.dict->items.size());
        default: fail("object of type '" + kind_name(v) + "' has no len()");
    }
}

// Python float(str): optional whitespace, sign, digits with '_' between digits, inf/nan.
std::optional<double> parse_py_float(std::string_view s) {
    std::string t = py_strip(s, nullptr, true, true);
    std::string clean;
    for (std::size_t k = 0; k < t.size(); ++k) {
        char c = t[k];
        if (c == '_') {
            bool ok = k > 0 && k + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[k - 1])) && std::isdigit(static_cast<unsigned char>(t[k + 1]));
            if (!ok) return std::nullopt;
            continue;
        }
        clean.push_back(c);
    }
    if (clean.empty()) return std::nullopt;
    std::string low = py_lower(clean);
    std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
    if (body == "inf" || body == "infinity") return low[0] == '-' ? -INFINITY : INFINITY;
    if (body == "nan") return NAN;
    for (char c : body)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) return std::nullopt;
    char* end = nullptr;
    double d = std::strtod(clean.c_str(), &end);
    if (!end || *end != 0) return std::nullopt;
    return d;
}

std::optional<std::int64_t> parse_py_int(std::string_view s, int base) {
    std::string t = py_strip(s, nullptr, true, true);
    std::size_t k = 0;
    bool neg = false;
    if (k < t.size() && (t[k] == '+' || t[k] == '-')) neg = t[k++] == '-';
    if (k + 1 < t.size() && t[k] == '0') {
        char p = static_cast<char>(std::tolower(static_cast<unsigned char>(t[k + 1])));
        if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) {
            k += 2;
            if (k < t.size() && t[k] == '_') ++k;
        }
    }
    if (k >= t.size()) return std::nullopt;
    std::int64_t v = 0;
    bool prev_digit = false;
    for (; k < t.size(); ++k) {
        char c = t[k];
        if (c == '_') {
            if (!prev_digit || k + 1 >= t.size()) return std::nullopt;
            prev_digit = false;
            continue;
        }
        int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : std::isalpha(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10 : 99;
        if (d >= base) return std::nullopt;
        if (__builtin_mul_overflow(v, static_cast<std::int64_t>(base), &v) || __builtin_add_overflow(v, static_cast<std::int64_t>(d), &v))
            fail("integer too large");
        prev_digit = true;
    }
    if (!prev_digit) return std::nullopt;
    return neg ? -v : v;
}

std::int64_t float_to_int(double d) {
    if (std::isnan(d)) fail("cannot convert float NaN to integer");
    if (std::isinf(d)) fail("cannot convert float infinity to integer");
    double t = std::trunc(d);
    if (t >= 9.2233720368547758e18 || t < -9.2233720368547758e18) fail("integer too large");
    return static_cast<std::int64_t>(t);
}

// Python str.center/ljust/rjust
std::string pad(const std::string& s, std::int64_t width, const std::string& fill, int mode) {
    std::int64_t len = static_cast<std::int64_t>(utf8_length(s));
    if (width <= len) return s;
    check_size(static_cast<std::size_t>(width) * std::max<std::size_t>(fill.size(), 1));
    std::int64_t marg = width - len;
    std::int64_t left = mode == 0 ? marg / 2 + (marg & width & 1) : mode < 0 ? 0 : marg;
    std::string out;
    for (std::int64_t k = 0; k < left; ++k) out += fill;
    out += s;
    for (std::int64_t k = 0; k < marg - left; ++k) out += fill;
    return out;
}

std::string fill_char(const Value* v) {
    if (!v) return " ";
    if (!v->is_string() || utf8_length(v->s) != 1) fail("the fill character must be exactly one character long");
    return v->s;
}

bool cp_is(char32_t c, std::initializer_list<utf8proc_category_t> cats) {
    auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    for (auto x : cats)
        if (cat == x) return true;
    return false;
}
bool cp_alpha(char32_t c) {
    return cp_is(c, {UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LM, UTF8PROC_CATEGORY_LO});
}
bool cp_numeric(char32_t c) { return cp_is(c, {UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NO}); }
bool cp_decimal(char32_t c) { return cp_is(c, {UTF8PROC_CATEGORY_ND}); }
bool cp_word(char32_t c) { return c == '_' || cp_alpha(c) || cp_numeric(c) || cp_is(c, {UTF8PROC_CATEGORY_MN, UTF8PROC_CATEGORY_MC}); }

bool str_all(const std::string& s, bool (*pred)(char32_t)) {
    auto cps = decode_utf8(s);
    if (cps.empty()) return false;
    return std::all_of(cps.begin(), cps.end(), pred);
}

// Python str.islower / str.isupper
bool str_case(const std::string& s, bool lower) {
    bool cased = false;
    for (char32_t c : decode_utf8(s)) {
        if (cp_is(c, {UTF8PROC_CATEGORY_LT})) return false;
        if (cp_is(c, {UTF8PROC_CATEGORY_LU})) { if (lower) return false; cased = true; }
        else if (cp_is(c, {UTF8PROC_CATEGORY_LL})) { if (!lower) return false; cased = true; }
    }
    return cased;
}

// Byte offset of code point `cp` in s (s.size() past the end).
std::size_t cp_offset(const std::string& s, std::int64_t cp) {
    std::size_t at = 0;
    for (std::int64_t k = 0; k < cp && at < s.size(); ++k) {
        ++at;
        while (at < s.size() && utf8_is_continuation(static_cast<unsigned char>(s[at]))) ++at;
    }
    charge_bytes(at);
    return at;
}

// str.find family on code-point positions; the search itself is on bytes (UTF-8 matches on code points).
std::int64_t find_cp(const std::string& s, const std::string& sub, const Value* start, const Value* end, bool reverse) {
    const std::int64_t n = static_cast<std::int64_t>(utf8_length(s));
    auto norm = [&](const Value* v, std::int64_t def) {
        if (!v || v->is_none()) return def;
        std::int64_t x = int_arg(v, def, "str.find");
        if (x < 0) x = std::max<std::int64_t>(0, x + n);
        return std::min(x, n);
    };
    const std::int64_t b = norm(start, 0), e = norm(end, n);
    const std::int64_t m = static_cast<std::int64_t>(utf8_length(sub));
    if (e - b < m) return -1;
    const std::size_t bb = cp_offset(s, b), eb = cp_offset(s, e);
    const std::string_view range = std::string_view(s).substr(bb, eb - bb);
    const std::size_t at = reverse ? rfind_text(range, sub) : find_text(range, sub);
    if (at == std::string_view::npos) return -1;
    return b + static_cast<std::int64_t>(utf8_length(range.substr(0, at)));
}

// Python str.format with positional/named fields and !s / !r conversions (no format specs).
std::string py_format(Interp& in, const std::string& fmt, Args& a) {
    std::string out;
    std::size_t auto_idx = 0;
    for (std::size_t k = 0; k < fmt.size(); ++k) {
        char c = fmt[k];
        if (c == '}') {
            if (k + 1 < fmt.size() && fmt[k + 1] == '}') { out += '}'; ++k; continue; }
            fail("str.format: single '}' encountered in format string");
        }
        if (c != '{') { out += c; continue; }
        if (k + 1 < fmt.size() && fmt[k + 1] == '{') { out += '{'; ++k; continue; }
        std::size_t close = fmt.find('}', k);
        if (close == std::string::npos) fail("str.format: single '{' encountered in format string");
        std::string field = fmt.substr(k + 1, close - k - 1);
        k = close;
        char conv = 0;
        std::size_t colon = field.find(':');
        if (colon != std::string::npos) {
            if (colon + 1 < field.size()) fail("unsupported: format spec in str.format ('" + field + "')");
            field.resize(colon);
        }
        std::size_t bang = field.find('!');
        if (bang != std::string::npos) {
            if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) fail("str.format: bad conversion in '" + field + "'");
            conv = field[bang + 1];
            field.resize(bang);
        }
        std::string base = field, rest;
        std::size_t sep = field.find_first_of(".[");
        if (sep != std::string::npos) { base = field.substr(0, sep); rest = field.substr(sep); }
        Value v;
        if (base.empty()) {
            if (auto_idx >= a.pos.size()) fail("str.format: replacement index " + std::to_string(auto_idx) + " out of range");
            v = a.pos[auto_idx++];
        } else if (std::all_of(base.begin(), base.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
            std::size_t idx = std::stoul(base);
            if (idx >= a.pos.size()) fail("str.format: replacement index " + base + " out of range");
            v = a.pos[idx];
        } else {
            bool found = false;
            for (auto& kv : a.kw)
                if (kv.first == base) { v = kv.second; found = true; }
            if (!found) fail("str.format: missing keyword argument '" + base + "'");
        }
        while (!rest.empty()) {
            if (rest[0] == '.') {
                std::size_t e = rest.find_first_of(".[", 1);
                v = in.getattr(v, rest.substr(1, e == std::string::npos ? std::string::npos : e - 1));
                rest = e == std::string::npos ? "" : rest.substr(e);
            } else {
                std::size_t e = rest.find(']');
                if (e == std::string::npos) fail("str.format: missing ']' in format string");
                std::string key = rest.substr(1, e - 1);
                bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
                v = in.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
                rest = rest.substr(e + 1);
            }
        }
        out += conv == 'r' ? to_repr(v) : to_str(v);
        check_size(out.size());
    }
    return out;
}

// ---------------------------------------------------------------- filters
using FilterFn = Value (*)(Interp&, const Value&, Args&);

Value f_abs(Interp&, const Value& v, Args& a) {
    bind("abs", a, {});
    if (v.kind == Kind::Int) {
        if (v.i == std::numeric_limits<std::int64_t>::min()) return Value::big_integer(std::to_string(v.i).substr(1));
        return Value::integer(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == Kind::BigInt) return v.s.str()[0] == '-' ? Value::big_integer(v.s.str().substr(1)) : v;
    if (v.kind == Kind::Bool) return Value::integer(v.b);
    if (v.kind == Kind::Float) return Value::real(std::fabs(v.f));
    if (v.is_undefined()) fail_undefined(v);
    fail("bad operand type for abs(): '" + kind_name(v) + "'");
}

Value f_attr(Interp& in, const Value& v, Args& a) {
    Bound b = bind("attr", a, {"name"});
    std::string name = str_arg(b.get(0), "", "attr");
    if (v.is_undefined()) fail_undefined(v);
    if (v.kind == Kind::Namespace) return in.getattr(v, name);
    Value m = bound_method(v, name);
    if (!m.is_undefined() || !m.s.empty()) return m;
    return Value::undefined("'" + kind_name(v) + " object' has no attribute '" + name + "'");
}

Value f_capitalize(Interp&, const Value& v, Args& a) { bind("capitalize", a, {}); return Value::string(py_capitalize(to_str(v))); }
Value f_upper(Interp&, const Value& v, Args& a) { bind("upper", a, {}); return Value::string(py_upper(to_str(v))); }
Value f_lower(Interp&, const Value& v, Args& a) { bind("lower", a, {}); return Value::string(py_lower(to_str(v))); }
Value f_string(Interp&, const Value& v, Args& a) { bind("string", a, {}); return Value::string(to_str(v)); }
Value f_safe(Interp&, const Value& v, Args& a) { bind("safe", a, {}); return v.is_string() ? v : Value::string(to_str(v)); }
Value f_escape(Interp&, const Value& v, Args& a) { bind("escape", a, {}); return Value::string(html_escape(to_str(v))); }
Value f_length(Interp&, const Value& v, Args& a) { bind("length", a, {}); return Value::integer(length_of(v)); }
Value f_list(Interp& in, const Value& v, Args& a) { bind("list", a, {}); return Value::make_list(in.iterate(v)); }

Value f_title(Interp&, const Value& v, Args& a) {
    bind("title", a, {});
    // jinja2 do_title: split on runs of [-\s({[<], then item[0].upper() + item[1:].lower()
    auto cps = decode_utf8(to_str(v));
    auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
    std::string out;
    std::size_t k = 0;
    while (k < cps.size()) {
        std::size_t j = k;
        bool sep = is_sep(cps[k]);
        while (j < cps.size() && is_sep(cps[j]) == sep) ++j;
        std::vector<char32_t> first(cps.begin() + static_cast<std::ptrdiff_t>(k), cps.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        std::vector<char32_t> rest(cps.begin() + static_cast<std::ptrdiff_t>(k) + 1, cps.begin() + static_cast<std::ptrdiff_t>(j));
        out += py_upper(encode_utf8(first));
        out += py_lower(encode_utf8(rest));
        k = j;
    }
    return Value::string(std::move(out));
}

Value f_trim(Interp&, const Value& v, Args& a) {
    Bound b = bind("trim", a, {"chars"});
    return Value::string(py_strip(to_str(v), b.get(0), true, true));
}

Value f_replace(Interp&, const Value& v, Args& a) {
    Bound b = bind("replace", a, {"old", "new", "count"});
    if (!b.get(0) || !b.get(1)) fail("replace() missing required arguments 'old' and 'new'");
    return Value::string(py_replace(to_str(v), to_str(*b.get(0)), to_str(*b.get(1)), int_arg(b.get(2), -1, "replace")));
}

Value f_default(Interp&, const Value& v, Args& a) {
    Bound b = bind("default", a, {"default_value", "boolean"});
    bool boolean = bool_arg(b.get(1), false);
    if (v.is_undefined() || (boolean && !truthy(v))) return b.get(0) ? *b.get(0) : Value::string("");
    return v;
}

Value f_first(Interp& in, const Value& v, Args& a) {
    bind("first", a, {});
    if (v.is_seq()) {
        if (v.list->items.empty()) return Value::undefined("No first item, sequence was empty.");
        return v.list->items.front();
    }
    std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(Interp& in, const Value& v, Args& a) {
    bind("last", a, {});
    if (v.gen) fail("'generator' object is not reversible");
    std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_join(Interp& in, const Value& v, Args& a) {
    Bound b = bind("join", a, {"d", "attribute"});
    std::string sep = b.get(0) ? to_str(*b.get(0)) : "";
    std::string out;
    bool first = true;
    for (const auto& item : in.iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += to_str(b.has(1) ? attr_path(in, item, *b.get(1)) : item);
        check_size(out.size());
    }
    return Value::string(std::move(out));
}

Value f_int(Interp&, const Value& v, Args& a) {
    Bound b = bind("int", a, {"default", "base"});
    Value def = b.get(0) ? *b.get(0) : Value::integer(0);
    std::int64_t base = int_arg(b.get(1), 10, "int");
    switch (v.kind) {
        case Kind::Int: case Kind::BigInt: return v;
        case Kind::Bool: return Value::integer(v.b);
        case Kind::Float:
            if (std::isnan(v.f)) return def;
            return Value::integer(float_to_int(v.f));
        case Kind::String: {
            if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36");
            if (auto i = parse_py_int(v.s, static_cast<int>(base))) return Value::integer(*i);
            if (auto d = parse_py_float(v.s)) {
                if (std::isnan(*d)) return def;
                return Value::integer(float_to_int(*d));
            }
            return def;
        }
        default: return def;
    }
}

Value f_float(Interp&, const Value& v, Args& a) {
    Bound b = bind("float", a, {"default"});
    Value def = b.get(0) ? *b.get(0) : Value::real(0.0);
    switch (v.kind) {
        case Kind::Int: return Value::real(static_cast<double>(v.i));
        case Kind::BigInt: {  // Python's float(int): correctly rounded, OverflowError past the largest double
            const double d = std::strtod(v.s.str().c_str(), nullptr);
            if (std::isinf(d)) fail("int too large to convert to float");
            return Value::real(d);
        }
        case Kind::Bool: return Value::real(v.b ? 1.0 : 0.0);
        case Kind::Float: return v;
        case Kind::String:
            if (auto d = parse_py_float(v.s)) return Value::real(*d);
            return def;
        default: return def;
    }
}

Value f_items(Interp&, const Value& v, Args& a) {
    bind("items", a, {});
    if (v.is_undefined()) return make_gen({});
    if (v.kind != Kind::Dict) fail("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& kv : v.dict->items) out.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
    return make_gen(std::move(out));
}

Value f_dictsort(Interp& in, const Value& v, Args& a) {
    Bound b = bind("dictsort", a, {"case_sensitive", "by", "reverse"});
    bool cs = bool_arg(b.get(0), false);
    std::string by = b.get(1) ? str_arg(b.get(1), "key", "dictsort") : "key";
    if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
    bool rev = bool_arg(b.get(2), false);
    if (v.kind != Kind::Dict) fail("dictsort: expected a mapping, got " + kind_name(v));
    std::vector<Value> items;
    for (const auto& kv : v.dict->items) items.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
    std::size_t pos = by == "key" ? 0 : 1;
    in.step(items.size());
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        Value kx = lower_if_string(x.list->items[pos], cs), ky = lower_if_string(y.list->items[pos], cs);
        int c = compare(kx, ky, "<");
        return rev ? c > 0 && c != 2 : c < 0;
    });
    return Value::make_list(std::move(items));
}

Value f_indent(Interp&, const Value& v, Args& a) {
    Bound b = bind("indent", a, {"width", "first", "blank"});
    std::string ind;
    if (b.get(0) && b.get(0)->is_string()) ind = b.get(0)->s;
    else {
        // The width is the template's to choose, so it is bounded like any string it builds before it is made
        // (a fuzzed indent(333333333331) asked for 333 GB).
        const std::int64_t width = std::max<std::int64_t>(0, int_arg(b.get(0), 4, "indent"));
        check_size(static_cast<std::uint64_t>(width) > kMaxOutputBytes ? kMaxOutputBytes + 1 : static_cast<std::size_t>(width));
        ind = std::string(static_cast<std::size_t>(width), ' ');
    }
    bool first = bool_arg(b.get(1), false), blank = bool_arg(b.get(2), false);
    std::string s = to_str(v) + "\n";
    std::vector<std::string> lines = py_splitlines(s, false);
    std::string rv;
    if (blank) {
        for (std::size_t k = 0; k < lines.size(); ++k) {
            if (k) rv += "\n" + ind;
            rv += lines[k];
            check_size(rv.size());
        }
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (std::size_t k = 1; k < lines.size(); ++k) {
            rv += "\n";
            if (!lines[k].empty()) rv += ind;
            rv += lines[k];
            check_size(rv.size());
        }
    }
    if (first) rv = ind + rv;
    return Value::string(std::move(rv));
}

Value f_map(Interp& in, const Value& v, Args& a) {
    std::vector<Value> out;
    auto items = truthy(v) ? in.iterate(v) : std::vector<Value>{};
    bool by_attr = a.pos.empty() && std::any_of(a.kw.begin(), a.kw.end(), [](auto& kv) { return kv.first == "attribute"; });
    if (by_attr) {
        Value attribute, def;
        bool has_def = false;
        for (auto& kv : a.kw) {
            if (kv.first == "attribute") attribute = kv.second;
            else if (kv.first == "default") { def = kv.second; has_def = !kv.second.is_none(); }
            else fail("map: unexpected keyword argument '" + kv.first + "'");
        }
        for (const auto& item : items) {
            Value r = attr_path(in, item, attribute);
            if (has_def && r.is_undefined()) r = def;
            out.push_back(std::move(r));
        }
        return make_gen(std::move(out));
    }
    if (a.pos.empty()) fail("map requires a filter argument");
    std::string name = to_str(a.pos[0]);
    Args rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const auto& item : items) {
        Args copy = rest;
        out.push_back(call_filter(in, name, item, copy));
    }
    return make_gen(std::move(out));
}

Value select_reject(Interp& in, const Value& v, Args& a, bool lookup_attr, bool select, const char* what) {
    std::size_t off = 0;
    Value attribute;
    if (lookup_attr) {
        if (a.pos.empty()) fail(std::string(what) + ": missing parameter for attribute name");
        attribute = a.pos[0];
        off = 1;
    }
    bool has_test = a.pos.size() > off;
    std::string test = has_test ? to_str(a.pos[off]) : "";
    Args targs;
    if (has_test) targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.pos.end());
    targs.kw = a.kw;
    std::vector<Value> out;
    auto items = truthy(v) ? in.iterate(v) : std::vector<Value>{};
    for (const auto& item : items) {
        Value x = lookup_attr ? attr_path(in, item, attribute) : item;
        bool r;
        if (has_test) {
            Args copy = targs;
            r = call_test(in, test, x, copy);
        } else {
            r = truthy(x);
        }
        if (r == select) out.push_back(item);
    }
    return make_gen(std::move(out));
}
Value f_select(Interp& in, const Value& v, Args& a) { return select_reject(in, v, a, false, true, "select"); }
Value f_reject(Interp& in, const Value& v, Args& a) { return select_reject(in, v, a, false, false, "reject"); }
Value f_selectattr(Interp& in, const Value& v, Args& a) { return select_reject(in, v, a, true, true, "selectattr"); }
Value f_rejectattr(Interp& in, const Value& v, Args& a) { return select_reject(in, v, a, true, false, "rejectattr"); }

// Sort key for sort/unique/min/max: attribute path(s), lower-cased strings unless case-sensitive.
Value sort_key(Interp& in, const Value& item, const Value* attribute, bool cs) {
    if (!attribute || attribute->is_none()) return lower_if_string(item, cs);
    if (attribute->is_string() && attribute->s.str().find(',') != std::string::npos) {
        std::vector<Value> parts;
        std::vector<std::string> names;
        std::string cur;
        for (char c : attribute->s.str()) {
            if (c == ',') { names.push_back(cur); cur.clear(); } else cur += c;
        }
        names.push_back(cur);
        for (auto& n : names) parts.push_back(lower_if_string(attr_path(in, item, Value::string(py_strip(n, nullptr, true, true))), cs));
        return Value::make_list(std::move(parts), true);
    }
    return lower_if_string(attr_path(in, item, *attribute), cs);
}

Value f_sort(Interp& in, const Value& v, Args& a) {
    Bound b = bind("sort", a, {"reverse", "case_sensitive", "attribute"});
    bool rev = bool_arg(b.get(0), false), cs = bool_arg(b.get(1), false);
    std::vector<Value> items = in.iterate(v);
    std::vector<std::pair<Value, Value>> keyed;
    for (auto& x : items) keyed.emplace_back(sort_key(in, x, b.get(2), cs), x);
    in.step(keyed.size() * 4);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        int c = rev ? compare(y.first, x.first, "<") : compare(x.first, y.first, "<");
        return c < 0;
    });
    std::vector<Value> out;
    for (auto& kv : keyed) out.push_back(std::move(kv.second));
    return Value::make_list(std::move(out));
}

Value f_unique(Interp& in, const Value& v, Args& a) {
    Bound b = bind("unique", a, {"case_sensitive", "attribute"});
    bool cs = bool_arg(b.get(0), false);
    std::vector<Value> seen, out;
    for (const auto& x : in.iterate(v)) {
        Value k = sort_key(in, x, b.get(1), cs);
        in.step(seen.size());
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
            seen.push_back(k);
            out.push_back(x);
        }
    }
    return make_gen(std::move(out));
}

Value min_max(Interp& in, const Value& v, Args& a, bool is_max, const char* what) {
    Bound b = bind(what, a, {"case_sensitive", "attribute"});
    bool cs = bool_arg(b.get(0), false);
    std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    std::size_t best = 0;
    Value bk = sort_key(in, items[0], b.get(1), cs);
    for (std::size_t k = 1; k < items.size(); ++k) {
        Value kk = sort_key(in, items[k], b.get(1), cs);
        int c = compare(kk, bk, is_max ? ">" : "<");
        if (c != 2 && (is_max ? c > 0 : c < 0)) { best = k; bk = kk; }
    }
    return items[best];
}
Value f_max(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, true, "max"); }
Value f_min(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, false, "min"); }

Value f_sum(Interp& in, const Value& v, Args& a) {
    Bound b = bind("sum", a, {"attribute", "start"});
    Value acc = b.get(1) ? *b.get(1) : Value::integer(0);
    for (const auto& x : in.iterate(v)) acc = in.arith("+", acc, b.has(0) ? attr_path(in, x, *b.get(0)) : x);
    return acc;
}

Value f_reverse(Interp& in, const Value& v, Args& a) {
    bind("reverse", a, {});
    if (v.is_string()) {
        auto cps = decode_utf8(v.s);
        std::reverse(cps.begin(), cps.end());
        return Value::string(encode_utf8(cps));
    }
    std::vector<Value> items = in.iterate(v);
    std::reverse(items.begin(), items.end());
    if (v.gen) return Value::make_list(std::move(items));
    return make_gen(std::move(items));
}

Value f_round(Interp&, const Value& v, Args& a) {
    Bound b = bind("round", a, {"precision", "method"});
    std::int64_t prec = int_arg(b.get(0), 0, "round");
    std::string method = b.get(1) ? str_arg(b.get(1), "common", "round") : "common";
    if (method != "common" && method != "ceil" && method != "floor") fail("method must be 'common', 'ceil' or 'floor'");
    double x;
    if (v.kind == Kind::Float) x = v.f;
    else if (v.kind == Kind::BigInt) {
        if (method == "common") return v;  // round() of an int is that int
        fail("round: unsupported: " + method + " of an integer beyond 64 bits");
    } else if (v.kind == Kind::Int || v.kind == Kind::Bool) {
        if (method == "common") return Value::integer(v.kind == Kind::Int ? v.i : v.b);
        x = static_cast<double>(v.kind == Kind::Int ? v.i : v.b);
    } else {
        if (v.is_undefined()) fail_undefined(v);
        fail("round: expected a number, got " + kind_name(v));
    }
    if (method == "common") {
        if (!std::isfinite(x)) return Value::real(x);
        if (prec < 0 || prec > 300) fail("unsupported: round() precision out of range");
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);
        return Value::real(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(prec));
    double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
    return Value::real(r / scale);
}

Value f_tojson(Interp&, const Value& v, Args& a) {
    // transformers' override: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    Bound b = bind("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions o;
    o.ensure_ascii = bool_arg(b.get(0), false);
    if (b.has(1)) {
        const Value& ind = *b.get(1);
        o.has_indent = true;
        if (ind.is_string()) o.indent = ind.s;
        else o.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, int_arg(&ind, 0, "tojson indent"))), ' ');
        o.item_sep = ",";
    }
    if (b.has(2)) {
        const Value& sep = *b.get(2);
        if (!sep.is_seq() || sep.gen || sep.list->items.size() != 2 || !sep.list->items[0].is_string() || !sep.list->items[1].is_string())
            fail("tojson: separators must be a (item_separator, key_separator) pair of strings");
        o.item_sep = sep.list->items[0].s;
        o.key_sep = sep.list->items[1].s;
    }
    o.sort_keys = bool_arg(b.get(3), false);
    return Value::string(to_json(v, o));
}

Value f_wordcount(Interp&, const Value& v, Args& a) {
    bind("wordcount", a, {});
    std::int64_t n = 0;
    bool in_word = false;
    for (char32_t c : decode_utf8(to_str(v))) {
        bool w = cp_word(c);
        if (w && !in_word) ++n;
        in_word = w;
    }
    return Value::integer(n);
}

Value f_center(Interp&, const Value& v, Args& a) {
    Bound b = bind("center", a, {"width"});
    return Value::string(pad(to_str(v), int_arg(b.get(0), 80, "center"), " ", 0));
}

Value f_truncate(Interp&, const Value& v, Args& a) {
    Bound b = bind("truncate", a, {"length", "killwords", "end", "leeway"});
    std::int64_t length = int_arg(b.get(0), 255, "truncate");
    bool killwords = bool_arg(b.get(1), false);
    std::string end = b.get(2) ? to_str(*b.get(2)) : "...";
    std::int64_t leeway = int_arg(b.get(3), 5, "truncate");
    std::string s = to_str(v);
    auto cps = decode_utf8(s);
    std::int64_t endlen = static_cast<std::int64_t>(utf8_length(end));
    if (length < endlen) fail("expected length >= " + std::to_string(endlen) + ", got " + std::to_string(length));
    if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
    if (static_cast<std::int64_t>(cps.size()) <= length + leeway) return Value::string(s);
    std::string head = encode_utf8(std::vector<char32_t>(cps.begin(), cps.begin() + (length - endlen)));
    if (killwords) return Value::string(head + end);
    Value space = Value::string(" ");
    std::vector<std::string> parts = py_rsplit(head, &space, 1);
    return Value::string(parts[0] + end);
}

const std::map<std::string, FilterFn>& filters() {
    static const std::map<std::string, FilterFn> m = {
        {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
        {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
        {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float},
        {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last},
        {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max},
        {"min", f_min}, {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
        {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
        {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
        {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate},
        {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
    };
    return m;
}

// ---------------------------------------------------------------- tests
using TestFn = bool (*)(Interp&, const Value&, Args&);

Value the_arg(Args& a, const char* what) {
    if (a.pos.size() + a.kw.size() != 1) fail(std::string("test '") + what + "' takes exactly one argument");
    return a.pos.empty() ? a.kw[0].second : a.pos[0];
}
void no_args(Args& a, const char* what) {
    if (!a.pos.empty() || !a.kw.empty()) fail(std::string("test '") + what + "' takes no arguments");
}

bool t_defined(Interp&, const Value& v, Args& a) { no_args(a, "defined"); return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, Args& a) { no_args(a, "undefined"); return v.is_undefined(); }
bool t_none(Interp&, const Value& v, Args& a) { no_args(a, "none"); return v.is_none(); }
bool t_boolean(Interp&, const Value& v, Args& a) { no_args(a, "boolean"); return v.kind == Kind::Bool; }
bool t_true(Interp&, const Value& v, Args& a) { no_args(a, "true"); return v.kind == Kind::Bool && v.b; }
bool t_false(Interp&, const Value& v, Args& a) { no_args(a, "false"); return v.kind == Kind::Bool && !v.b; }
bool t_integer(Interp&, const Value& v, Args& a) { no_args(a, "integer"); return v.kind == Kind::Int || v.kind == Kind::BigInt; }
bool t_float(Interp&, const Value& v, Args& a) { no_args(a, "float"); return v.kind == Kind::Float; }
bool t_number(Interp&, const Value& v, Args& a) { no_args(a, "number"); return v.is_number(); }
bool t_string(Interp&, const Value& v, Args& a) { no_args(a, "string"); return v.is_string(); }
bool t_mapping(Interp&, const Value& v, Args& a) { no_args(a, "mapping"); return v.kind == Kind::Dict; }
bool t_callable(Interp&, const Value& v, Args& a) { no_args(a, "callable"); return v.kind == Kind::Callable || v.is_undefined(); }
bool t_escaped(Interp&, const Value&, Args& a) { no_args(a, "escaped"); return false; }
bool t_iterable(Interp&, const Value& v, Args& a) {
    no_args(a, "iterable");
    return v.is_undefined() || v.is_string() || v.is_seq() || v.kind == Kind::Dict;
}
bool t_sequence(Interp&, const Value& v, Args& a) {
    no_args(a, "sequence");
    return v.is_undefined() || v.is_string() || (v.is_seq() && !v.gen) || v.kind == Kind::Dict;
}
bool t_lower(Interp&, const Value& v, Args& a) { no_args(a, "lower"); return str_case(to_str(v), true); }
bool t_upper(Interp&, const Value& v, Args& a) { no_args(a, "upper"); return str_case(to_str(v), false); }
bool t_odd(Interp& in, const Value& v, Args& a) { no_args(a, "odd"); return equals(in.arith("%", v, Value::integer(2)), Value::integer(1)); }
bool t_even(Interp& in, const Value& v, Args& a) { no_args(a, "even"); return equals(in.arith("%", v, Value::integer(2)), Value::integer(0)); }
bool t_divisibleby(Interp& in, const Value& v, Args& a) { return equals(in.arith("%", v, the_arg(a, "divisibleby")), Value::integer(0)); }
bool t_eq(Interp&, const Value& v, Args& a) { return equals(v, the_arg(a, "eq")); }
bool t_ne(Interp&, const Value& v, Args& a) { return !equals(v, the_arg(a, "ne")); }
bool t_lt(Interp&, const Value& v, Args& a) { int c = compare(v, the_arg(a, "lt"), "<"); return c < 0; }
bool t_le(Interp&, const Value& v, Args& a) { int c = compare(v, the_arg(a, "le"), "<="); return c <= 0; }
bool t_gt(Interp&, const Value& v, Args& a) { int c = compare(v, the_arg(a, "gt"), ">"); return c > 0 && c != 2; }
bool t_ge(Interp&, const Value& v, Args& a) { int c = compare(v, the_arg(a, "ge"), ">="); return c >= 0 && c != 2; }
bool t_in(Interp& in, const Value& v, Args& a) { return in.contains(the_arg(a, "in"), v); }
bool t_sameas(Interp&, const Value& v, Args& a) {
    Value o = the_arg(a, "sameas");
    if (v.kind != o.kind) return false;
    switch (v.kind) {
        case Kind::None: case Kind::Undefined: return v.kind == Kind::None;
        case Kind::Bool: return v.b == o.b;
        case Kind::Int: return v.i == o.i && v.i >= -5 && v.i <= 256;
        case Kind::List: case Kind::Tuple: return v.list == o.list;
        case Kind::Dict: return v.dict == o.dict;
        case Kind::Namespace: return v.ns == o.ns;
        case Kind::Callable: return v.fn == o.fn;
        default: return false;
    }
}
bool t_filter(Interp&, const Value& v, Args& a) { no_args(a, "filter"); return v.is_string() && has_filter(v.s); }
bool t_test(Interp&, const Value& v, Args& a) { no_args(a, "test"); return v.is_string() && has_test(v.s); }

const std::map<std::string, TestFn>& tests() {
    static const std::map<std::string, TestFn> m = {
        {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
        {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even},
        {"false", t_false}, {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge},
        {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"in", t_in}, {"integer", t_integer},
        {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le}, {"lower", t_lower}, {"lt", t_lt},
        {"lessthan", t_lt}, {"<", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"!=", t_ne},
        {"none", t_none}, {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas},
        {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true},
        {"undefined", t_undefined}, {"upper", t_upper},
    };
    return m;
}

// ---------------------------------------------------------------- methods
Value method(const std::string& qual, std::function<Value(Interp&, Args&)> fn) {
    return Value::callable(qual, std::move(fn));
}

bool prefix_match(const std::string& s, const Value& p, bool suffix, const char* what) {
    auto one = [&](const Value& x) {
        if (!x.is_string()) fail(std::string(what) + " first arg must be str or a tuple of str, not " + kind_name(x));
        if (x.s.size() > s.size()) return false;
        charge_bytes(x.s.size());
        return suffix ? s.compare(s.size() - x.s.size(), x.s.size(), x.s) == 0 : s.compare(0, x.s.size(), x.s) == 0;
    };
    if (p.kind == Kind::Tuple) {
        for (const auto& x : p.list->items)
            if (one(x)) return true;
        return false;
    }
    if (p.is_undefined()) fail_undefined(p);
    return one(p);
}

Value list_of_strings(const std::vector<std::string>& parts) {
    std::vector<Value> out;
    out.reserve(parts.size());
    for (const auto& p : parts) out.push_back(Value::string(p));
    return Value::make_list(std::move(out));
}

// str methods that cut: strip, split, splitlines, startswith / endswith. Each str_*_method returns
// the bound method, or nothing for a name of another group.
std::optional<Value> str_cut_method(const Text& s, const std::string& q, const std::string& name) {
    auto strip = [s, q](bool l, bool r) {
        return method(q, [s, q, l, r](Interp&, Args& a) {
            Bound b = bind(q, a, {"chars"}, false);
            return Value::string(py_strip(s, b.get(0), l, r));
        });
    };
    if (name == "strip") return strip(true, true);
    if (name == "lstrip") return strip(true, false);
    if (name == "rstrip") return strip(false, true);
    if (name == "split" || name == "rsplit") {
        bool rev = name == "rsplit";
        return method(q, [s, q, rev](Interp&, Args& a) {
            Bound b = bind(q, a, {"sep", "maxsplit"});
            std::int64_t maxsplit = int_arg(b.get(1), -1, q);
            return list_of_strings(rev ? py_rsplit(s, b.get(0), maxsplit) : py_split(s, b.get(0), maxsplit));
        });
    }
    if (name == "splitlines")
        return method(q, [s, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"keepends"});
            return list_of_strings(py_splitlines(s, bool_arg(b.get(0), false)));
        });
    if (name == "startswith" || name == "endswith") {
        bool suffix = name == "endswith";
        return method(q, [s, q, suffix](Interp&, Args& a) {
            Bound b = bind(q, a, {"prefix", "start", "end"}, false);
            if (!b.get(0)) fail(q + "() takes at least 1 argument");
            std::string sub = s;
            if (b.get(1) || b.get(2)) {
                auto cps = decode_utf8(s);
                std::int64_t n = static_cast<std::int64_t>(cps.size());
                auto norm = [&](const Value* v, std::int64_t def) {
                    if (!v || v->is_none()) return def;
                    std::int64_t x = int_arg(v, def, q);
                    if (x < 0) x = std::max<std::int64_t>(0, x + n);
                    return std::min(x, n);
                };
                std::int64_t st = norm(b.get(1), 0), en = norm(b.get(2), n);
                if (st > en) return Value::boolean(false);
                sub = encode_utf8(std::vector<char32_t>(cps.begin() + st, cps.begin() + en));
            }
            return Value::boolean(prefix_match(sub, *b.get(0), suffix, q.c_str()));
        });
    }
    return std::nullopt;
}

// str methods that change case.
std::optional<Value> str_case_method(const Text& s, const std::string& q, const std::string& name) {
    auto simple = [&](std::string (*fn)(std::string_view)) {
        return method(q, [s, q, fn](Interp&, Args& a) { bind(q, a, {}); return Value::string(fn(s)); });
    };
    if (name == "upper") return simple(py_upper);
    if (name == "lower" || name == "casefold") return simple(py_lower);
    if (name == "title") return simple(py_title);
    if (name == "capitalize") return simple(py_capitalize);
    if (name == "swapcase")
        return method(q, [s, q](Interp&, Args& a) {
            bind(q, a, {});
            std::string out;
            for (char32_t c : decode_utf8(s)) {
                std::string ch;
                append_utf8(ch, c);
                if (cp_is(c, {UTF8PROC_CATEGORY_LU})) out += py_lower(ch);
                else if (cp_is(c, {UTF8PROC_CATEGORY_LL})) out += py_upper(ch);
                else out += ch;
            }
            return Value::string(std::move(out));
        });
    return std::nullopt;
}

// str methods that search or join: replace, format, join, find / index, count.
std::optional<Value> str_search_method(const Text& s, const std::string& q, const std::string& name) {
    if (name == "replace")
        return method(q, [s, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"old", "new", "count"});
            if (!b.get(0) || !b.get(1)) fail(q + "() needs 'old' and 'new'");
            if (!b.get(0)->is_string() || !b.get(1)->is_string()) fail(q + "() arguments must be str");
            return Value::string(py_replace(s, b.get(0)->s, b.get(1)->s, int_arg(b.get(2), -1, q)));
        });
    if (name == "format") return method(q, [s](Interp& in, Args& a) { return Value::string(py_format(in, s, a)); });
    if (name == "join")
        return method(q, [s, q](Interp& in, Args& a) {
            Bound b = bind(q, a, {"iterable"}, false);
            if (!b.get(0)) fail(q + "() takes exactly one argument");
            std::string out;
            std::size_t idx = 0;
            for (const auto& x : in.iterate(*b.get(0))) {
                if (!x.is_string()) fail("sequence item " + std::to_string(idx) + ": expected str instance, " + kind_name(x) + " found");
                if (idx++) out += s;
                out += x.s;
                check_size(out.size());
            }
            return Value::string(std::move(out));
        });
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        bool rev = name[0] == 'r';
        bool raise = name.find("index") != std::string::npos;
        return method(q, [s, q, rev, raise](Interp&, Args& a) {
            Bound b = bind(q, a, {"sub", "start", "end"}, false);
            if (!b.get(0) || !b.get(0)->is_string()) fail(q + "() argument must be str");
            std::int64_t r = find_cp(s, b.get(0)->s, b.get(1), b.get(2), rev);
            if (r < 0 && raise) fail("substring not found");
            return Value::integer(r);
        });
    }
    if (name == "count")
        return method(q, [s, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"sub"}, false);
            if (!b.get(0) || !b.get(0)->is_string()) fail(q + "() argument must be str");
            const std::string& sub = b.get(0)->s;
            if (sub.empty()) return Value::integer(static_cast<std::int64_t>(utf8_length(s)) + 1);
            std::int64_t n = 0;
            for (std::size_t p = find_text(s, sub); p != std::string::npos; p = find_text(s, sub, p + sub.size())) ++n;
            return Value::integer(n);
        });
    return std::nullopt;
}

// str.is...() predicates.
std::optional<Value> str_predicate_method(const Text& s, const std::string& q, const std::string& name) {
    auto pred = [&](bool (*fn)(const std::string&)) {
        return method(q, [s, q, fn](Interp&, Args& a) { bind(q, a, {}); return Value::boolean(fn(s)); });
    };
    if (name == "isdigit" || name == "isdecimal") return pred([](const std::string& x) { return str_all(x, cp_decimal); });
    if (name == "isnumeric") return pred([](const std::string& x) { return str_all(x, cp_numeric); });
    if (name == "isalpha") return pred([](const std::string& x) { return str_all(x, cp_alpha); });
    if (name == "isalnum") return pred([](const std::string& x) { return str_all(x, [](char32_t c) { return cp_alpha(c) || cp_numeric(c); }); });
    if (name == "isspace") return pred([](const std::string& x) { return str_all(x, py_isspace); });
    if (name == "islower") return pred([](const std::string& x) { return str_case(x, true); });
    if (name == "isupper") return pred([](const std::string& x) { return str_case(x, false); });
    return std::nullopt;
}

// str methods that pad or split off a part: removeprefix / removesuffix, center, zfill, partition.
std::optional<Value> str_layout_method(const Text& s, const std::string& q, const std::string& name) {
    if (name == "removeprefix" || name == "removesuffix") {
        bool suffix = name == "removesuffix";
        return method(q, [s, q, suffix](Interp&, Args& a) {
            Bound b = bind(q, a, {"affix"}, false);
            if (!b.get(0) || !b.get(0)->is_string()) fail(q + "() argument must be str");
            const std::string& x = b.get(0)->s;
            const std::string& str = s;
            charge_bytes(x.size());
            if (x.size() <= str.size() && (suffix ? str.compare(str.size() - x.size(), x.size(), x) == 0 : str.compare(0, x.size(), x) == 0))
                return Value::string(suffix ? str.substr(0, str.size() - x.size()) : str.substr(x.size()));
            return Value::of_text(s);
        });
    }
    if (name == "center" || name == "ljust" || name == "rjust") {
        int mode = name == "center" ? 0 : name == "ljust" ? -1 : 1;
        return method(q, [s, q, mode](Interp&, Args& a) {
            Bound b = bind(q, a, {"width", "fillchar"}, false);
            return Value::string(pad(s, int_arg(b.get(0), 0, q), fill_char(b.get(1)), mode));
        });
    }
    if (name == "zfill")
        return method(q, [s, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"width"}, false);
            std::int64_t width = int_arg(b.get(0), 0, q);
            std::int64_t len = static_cast<std::int64_t>(utf8_length(s));
            if (width <= len) return Value::string(s);
            check_size(static_cast<std::size_t>(width));
            std::string sign;
            std::string body = s;
            if (!body.empty() && (body[0] == '+' || body[0] == '-')) { sign = body.substr(0, 1); body = body.substr(1); }
            return Value::string(sign + std::string(static_cast<std::size_t>(width - len), '0') + body);
        });
    if (name == "partition" || name == "rpartition") {
        bool rev = name[0] == 'r';
        return method(q, [s, q, rev](Interp&, Args& a) {
            Bound b = bind(q, a, {"sep"}, false);
            if (!b.get(0) || !b.get(0)->is_string() || b.get(0)->s.empty()) fail(q + "() needs a non-empty str separator");
            const std::string& sep = b.get(0)->s;
            std::size_t p = rev ? rfind_text(s, sep) : find_text(s, sep);
            if (p == std::string::npos)
                return rev ? Value::make_list({Value::string(""), Value::string(""), Value::of_text(s)}, true)
                           : Value::make_list({Value::of_text(s), Value::string(""), Value::string("")}, true);
            return Value::make_list({Value::string(s.str().substr(0, p)), *b.get(0), Value::string(s.str().substr(p + sep.size()))}, true);
        });
    }
    return std::nullopt;
}

Value string_method(const Value& obj, const std::string& name) {
    const Text s = obj.s;  // shared with the bound method, never copied
    const std::string q = "str." + name;
    for (auto group : {str_cut_method, str_case_method, str_search_method, str_predicate_method, str_layout_method})
        if (std::optional<Value> bound = group(s, q, name)) return *bound;
    return Value::undefined();
}

Value unsafe(const Value& obj, const std::string& name) {
    return Value::undefined("access to attribute '" + name + "' of '" + kind_name(obj) +
                            "' object is unsafe (the template sandbox keeps values immutable)");
}

Value dict_method(const Value& obj, const std::string& name) {
    auto d = obj.dict;
    const std::string q = "dict." + name;
    if (name == "items" || name == "keys" || name == "values") {
        int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
        return method(q, [d, q, which](Interp&, Args& a) {
            bind(q, a, {});
            std::vector<Value> out;
            for (const auto& kv : d->items) {
                if (which == 0) out.push_back(Value::make_list({Value::string(kv.first), kv.second}, true));
                else if (which == 1) out.push_back(Value::string(kv.first));
                else out.push_back(kv.second);
            }
            return Value::make_list(std::move(out));
        });
    }
    if (name == "get")
        return method(q, [d, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"key", "default"}, false);
            if (!b.get(0)) fail("get expected at least 1 argument, got 0");
            if (b.get(0)->is_string())
                if (const Value* v = d->find(b.get(0)->s)) return *v;
            return b.get(1) ? *b.get(1) : Value::none();
        });
    if (name == "copy") {
        Value self = obj;
        return method(q, [self, q](Interp&, Args& a) { bind(q, a, {}); return self; });
    }
    if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear")
        return unsafe(obj, name);
    return Value::undefined();
}

Value list_method(const Value& obj, const std::string& name) {
    const std::string q = kind_name(obj) + "." + name;
    if (obj.gen) return Value::undefined();
    auto l = obj.list;
    if (name == "index")
        return method(q, [l, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"value"}, false);
            if (!b.get(0)) fail(q + "() takes at least 1 argument");
            charge_steps(l->items.size());
            for (std::size_t k = 0; k < l->items.size(); ++k)
                if (equals(l->items[k], *b.get(0))) return Value::integer(static_cast<std::int64_t>(k));
            fail(to_repr(*b.get(0)) + " is not in list");
        });
    if (name == "count")
        return method(q, [l, q](Interp&, Args& a) {
            Bound b = bind(q, a, {"value"}, false);
            if (!b.get(0)) fail(q + "() takes exactly one argument");
            std::int64_t n = 0;
            charge_steps(l->items.size());
            for (const auto& x : l->items) n += equals(x, *b.get(0));
            return Value::integer(n);
        });
    if (obj.kind == Kind::List &&
        (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
         name == "sort" || name == "reverse" || name == "clear"))
        return unsafe(obj, name);
    return Value::undefined();
}

}  // namespace

// ---------------------------------------------------------------- registry access
bool has_filter(const std::string& name) { return filters().count(name) != 0; }
bool has_test(const std::string& name) { return tests().count(name) != 0; }

Value call_filter(Interp& in, const std::string& name, const Value& v, Args& args) {
    auto it = filters().find(name);
    if (it == filters().end()) fail("unknown filter '" + name + "'");
    return it->second(in, v, args);
}

bool call_test(Interp& in, const std::string& name, const Value& v, Args& args) {
    auto it = tests().find(name);
    if (it == tests().end()) fail("unknown test '" + name + "'");
    return it->second(in, v, args);
}

Value bound_method(const Value& obj, const std::string& name) {
    switch (obj.kind) {
        case Kind::String: return string_method(obj, name);
        case Kind::Dict: return dict_method(obj, name);
        case Kind::List: case Kind::Tuple: return list_method(obj, name);
        default: return Value::undefined();
    }
}

std::string html_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

Value make_global(const std::string& name) {
    if (name == "range")
        return Value::callable("range", [](Interp& in, Args& a) {
            if (!a.kw.empty()) fail("range() takes no keyword arguments");
            if (a.pos.empty() || a.pos.size() > 3) fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
            std::int64_t start = 0, stop, step = 1;
            if (a.pos.size() == 1) stop = int_arg(&a.pos[0], 0, "range");
            else {
                start = int_arg(&a.pos[0], 0, "range");
                stop = int_arg(&a.pos[1], 0, "range");
                if (a.pos.size() == 3) step = int_arg(&a.pos[2], 1, "range");
            }
            if (step == 0) fail("range() arg 3 must not be zero");
            long double span = static_cast<long double>(stop) - static_cast<long double>(start);
            long double count = std::ceil(span / static_cast<long double>(step));
            if (count > kMaxRange)
                fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
            std::vector<Value> out;
            for (std::int64_t x = start; step > 0 ? x < stop : x > stop; x += step) out.push_back(Value::integer(x));
            in.step(out.size());
            return Value::make_list(std::move(out));
        });
    if (name == "namespace" || name == "dict") {
        bool is_ns = name == "namespace";
        return Value::callable(name, [is_ns](Interp& in, Args& a) {
            Dict d;
            if (a.pos.size() > 1) fail(std::string(is_ns ? "namespace" : "dict") + "() takes at most 1 positional argument");
            if (!a.pos.empty()) {
                const Value& src = a.pos[0];
                if (src.kind == Kind::Dict) d = *src.dict;
                else if (src.kind == Kind::Namespace) d = src.ns->attrs;
                else {
                    for (const auto& pair : in.iterate(src)) {
                        std::vector<Value> kv = in.iterate(pair);
                        if (kv.size() != 2 || !kv[0].is_string()) fail("dictionary update sequence elements must be (str, value) pairs");
                        d.set(kv[0].s, kv[1]);
                    }
                }
            }
            for (auto& kv : a.kw) d.set(kv.first, kv.second);
            charge_bytes(d.items.size() * sizeof(d.items[0]));  // the copy (a namespace is not built by make_dict)
            if (!is_ns) return Value::make_dict(std::move(d));
            for (const auto& kv : d.items)
                if (kv.second.kind == Kind::Namespace) fail("unsupported: storing a namespace inside a namespace");
            Value v;
            v.kind = Kind::Namespace;
            v.ns = std::make_shared<Namespace>();
            v.ns->attrs = std::move(d);
            int depth = 0;
            for (const auto& kv : v.ns->attrs.items) depth = std::max(depth, kv.second.depth());
            v.ns->attrs.depth = depth + 1;
            return v;
        });
    }
    if (name == "raise_exception")
        return Value::callable("raise_exception", [](Interp&, Args& a) -> Value {
            std::string msg = a.pos.empty() ? (a.kw.empty() ? "" : to_str(a.kw[0].second)) : to_str(a.pos[0]);
            fail("raise_exception: " + msg);
        });
    if (name == "strftime_now")
        return Value::callable("strftime_now", [](Interp& in, Args& a) {
            Bound b = bind("strftime_now", a, {"format"});
            std::string fmt = str_arg(b.get(0), "", "strftime_now");
            std::tm tm{};
            if (in.now) {
                tm = *in.now;
            } else {
                std::time_t t = std::time(nullptr);
                localtime_r(&t, &tm);
            }
            charge_bytes(256 + fmt.size() * 8);  // before the buffer is allocated
            std::string out(256 + fmt.size() * 8, '\0');
            std::size_t n = fmt.empty() ? 0 : std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
            out.resize(n);
            return Value::string(std::move(out));
        });
    if (name == "joiner")
        return Value::callable("joiner", [](Interp&, Args& a) {
            Bound b = bind("joiner", a, {"sep"});
            std::string sep = b.get(0) ? to_str(*b.get(0)) : ", ";
            auto used = std::make_shared<bool>(false);
            return Value::callable("joiner", [sep, used](Interp&, Args&) {
                if (!*used) { *used = true; return Value::string(""); }
                return Value::string(sep);
            });
        });
    return Value::undefined();
}

}  // namespace colibri::jinja
