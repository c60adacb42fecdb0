// Jinja values with Python semantics: str()/repr(), ==/<, json.dumps, and the str methods'
// Unicode behaviour (code points, str.isspace, case mapping through utf8proc).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include <utf8proc.h>

#include "engine/text/jinja.h"

namespace colibri::jinja {

void fail(std::string message) { throw Error{std::move(message)}; }

void fail_undefined(const Value& v) {
    fail(v.s.empty() ? std::string("value is undefined") : v.s.str());
}

void check_size(std::size_t n) {
    if (n > kMaxOutputBytes) fail("template output exceeds the size limit of " + std::to_string(kMaxOutputBytes) + " bytes");
}

// ---------------------------------------------------------------- work budget
namespace {
thread_local Budget* current_budget = nullptr;
}

BudgetScope::BudgetScope(Budget& b) : saved_(current_budget) { current_budget = &b; }
BudgetScope::~BudgetScope() { current_budget = saved_; }

void charge_steps(std::uint64_t n) {
    Budget* b = current_budget;
    if (!b) return;
    b->steps += n;
    if (b->steps > kMaxSteps) fail("template exceeded the evaluation step limit of " + std::to_string(kMaxSteps) + " (runaway loop?)");
}

void charge_bytes(std::uint64_t n) {
    Budget* b = current_budget;
    if (!b) return;
    b->bytes += n;
    if (b->bytes > kMaxWorkBytes)
        fail("template exceeded the work limit of " + std::to_string(kMaxWorkBytes >> 20) + " MiB of string and list bytes processed");
}

// ---------------------------------------------------------------- construction
Value Value::undefined(std::string hint) {
    charge_bytes(hint.size());
    Value v; v.kind = Kind::Undefined; v.s = std::move(hint); return v;
}
Value Value::none() { Value v; v.kind = Kind::None; return v; }
Value Value::boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
Value Value::integer(std::int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
Value Value::real(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
Value Value::big_integer(std::string digits) {
    std::int64_t small = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), small);
    if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) return integer(small);  // fits: an ordinary int
    Value v = Value::string(std::move(digits));
    v.kind = Kind::BigInt;
    return v;
}
Value Value::string(std::string x) {
    check_size(x.size());
    charge_bytes(x.size());
    Value v; v.kind = Kind::String; v.s = std::move(x); return v;
}

Value Value::of_text(Text t) { Value v; v.kind = Kind::String; v.s = std::move(t); return v; }

int Value::depth() const {
    if ((kind == Kind::List || kind == Kind::Tuple) && list) return list->depth;
    if (kind == Kind::Dict && dict) return dict->depth;
    if (kind == Kind::Namespace && ns) return ns->attrs.depth;
    return 0;
}

Value Value::make_list(std::vector<Value> items, bool tuple) {
    if (items.size() > kMaxListItems) fail("list exceeds the size limit of " + std::to_string(kMaxListItems) + " items");
    charge_bytes(items.size() * sizeof(Value));
    auto l = std::make_shared<ListObj>();
    int d = 0;
    for (const auto& x : items) d = std::max(d, x.depth());
    if (d + 1 > kMaxValueDepth) fail("value nesting exceeds the depth limit of " + std::to_string(kMaxValueDepth));
    l->depth = d + 1;
    l->items = std::move(items);
    Value v; v.kind = tuple ? Kind::Tuple : Kind::List; v.list = std::move(l); return v;
}

Value Value::make_dict(Dict d) {
    if (d.items.size() > kMaxListItems) fail("dict exceeds the size limit of " + std::to_string(kMaxListItems) + " items");
    std::uint64_t bytes = d.items.size() * sizeof(d.items[0]);
    for (const auto& kv : d.items) bytes += kv.first.size();
    charge_bytes(bytes);
    int depth = 0;
    for (const auto& kv : d.items) depth = std::max(depth, kv.second.depth());
    if (depth + 1 > kMaxValueDepth) fail("value nesting exceeds the depth limit of " + std::to_string(kMaxValueDepth));
    d.depth = depth + 1;
    Value v; v.kind = Kind::Dict; v.dict = std::make_shared<const Dict>(std::move(d)); return v;
}

Value Value::callable(std::string name, std::function<Value(Interp&, Args&)> fn) {
    Value v; v.kind = Kind::Callable;
    v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
}

const Value* Dict::find(std::string_view key) const {
    charge_steps(items.size() / 16 + 1);  // a linear scan: big dicts cost in proportion
    for (const auto& kv : items)
        if (kv.first == key) return &kv.second;
    return nullptr;
}

void Dict::set(std::string key, Value v) {
    charge_steps(items.size() / 16 + 1);
    for (auto& kv : items)
        if (kv.first == key) { kv.second = std::move(v); return; }
    items.emplace_back(std::move(key), std::move(v));
}

// ---------------------------------------------------------------- UTF-8
std::vector<char32_t> decode_utf8(std::string_view s) {
    charge_bytes(s.size() * 4);  // the code points' vector
    std::vector<char32_t> out;
    out.reserve(s.size());
    for (std::size_t i = 0, n = 0; i < s.size(); i += n) {
        const char32_t cp = utf8_decode_at(s, i, &n);
        out.push_back(n == 1 && cp >= 0x80 ? char32_t{0xFFFD} : cp);  // not a lead byte, or a cut-off sequence
    }
    return out;
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) append_utf8(out, c);
    return out;
}

std::size_t utf8_length(std::string_view s) {
    charge_bytes(s.size());
    std::size_t n = 0;
    for (char ch : s)
        if (!utf8_is_continuation(static_cast<unsigned char>(ch))) ++n;
    return n;
}

// CPython's _PyUnicode_IsWhitespace.
bool py_isspace(char32_t c) {
    switch (c) {
        case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
        case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
        case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

static bool is_cased(char32_t c) {
    auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

static void append_upper(std::string& out, char32_t c) {
    if (c == 0xDF) { out += "SS"; return; }  // full case mapping of the one common special case
    append_utf8(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}
static void append_lower(std::string& out, char32_t c) {
    if (c == 0x130) { out += "i\xCC\x87"; return; }
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}
static void append_title(std::string& out, char32_t c) {
    if (c == 0xDF) { out += "Ss"; return; }
    append_utf8(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}

std::string py_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : decode_utf8(s)) append_upper(out, c);
    return out;
}
std::string py_lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : decode_utf8(s)) append_lower(out, c);
    return out;
}
std::string py_title(std::string_view s) {
    std::string out;
    bool prev_cased = false;
    for (char32_t c : decode_utf8(s)) {
        if (prev_cased) append_lower(out, c); else append_title(out, c);
        prev_cased = is_cased(c);
    }
    return out;
}
std::string py_capitalize(std::string_view s) {
    std::string out;
    bool first = true;
    for (char32_t c : decode_utf8(s)) {
        if (first) append_title(out, c); else append_lower(out, c);
        first = false;
    }
    return out;
}

std::string py_strip(std::string_view s, const Value* chars, bool left, bool right) {
    std::vector<char32_t> cps = decode_utf8(s);
    std::vector<char32_t> set;
    bool ws = true;
    if (chars && !chars->is_none() && !chars->is_undefined()) {
        if (!chars->is_string()) fail("strip arg must be None or str");
        set = decode_utf8(chars->s);
        ws = false;
    } else if (chars && chars->is_undefined()) {
        fail_undefined(*chars);
    }
    auto strip_it = [&](char32_t c) { return ws ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end(); };
    std::size_t b = 0, e = cps.size();
    if (left) while (b < e && strip_it(cps[b])) ++b;
    if (right) while (e > b && strip_it(cps[e - 1])) --e;
    return encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(b), cps.begin() + static_cast<std::ptrdiff_t>(e)));
}

static std::string sep_arg(const Value* sep, bool& whitespace) {
    whitespace = true;
    if (!sep || sep->is_none()) return {};
    if (sep->is_undefined()) fail_undefined(*sep);
    if (!sep->is_string()) fail("must be str or None, not " + kind_name(*sep));
    if (sep->s.empty()) fail("empty separator");
    whitespace = false;
    return sep->s;
}

std::vector<std::string> py_split(std::string_view s, const Value* sepv, std::int64_t maxsplit) {
    bool ws;
    std::string sep = sep_arg(sepv, ws);
    std::vector<std::string> out;
    if (!ws) {
        std::size_t pos = 0;
        while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
            std::size_t f = find_text(s, sep, pos);
            if (f == std::string_view::npos) break;
            out.emplace_back(s.substr(pos, f - pos));
            pos = f + sep.size();
        }
        out.emplace_back(s.substr(pos));
        return out;
    }
    std::vector<char32_t> cps = decode_utf8(s);
    std::size_t i = 0, n = cps.size();
    while (true) {
        while (i < n && py_isspace(cps[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
            out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.end())));
            break;
        }
        std::size_t j = i;
        while (j < n && !py_isspace(cps[j])) ++j;
        out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j))));
        i = j;
    }
    return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const Value* sepv, std::int64_t maxsplit) {
    bool ws;
    std::string sep = sep_arg(sepv, ws);
    std::vector<std::string> out;
    if (!ws) {
        // Splitting from the right is splitting the reversed bytes from the left: one linear pass.
        charge_bytes(s.size() + sep.size());
        std::string rs(s.rbegin(), s.rend()), rsep(sep.rbegin(), sep.rend());
        Value rsepv = Value::string(rsep);
        out = py_split(rs, &rsepv, maxsplit);
        for (auto& piece : out) std::reverse(piece.begin(), piece.end());
        std::reverse(out.begin(), out.end());
        return out;
    }
    std::vector<char32_t> cps = decode_utf8(s);
    std::size_t j = cps.size();
    while (true) {
        while (j > 0 && py_isspace(cps[j - 1])) --j;
        if (j == 0) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
            out.push_back(encode_utf8(std::vector<char32_t>(cps.begin(), cps.begin() + static_cast<std::ptrdiff_t>(j))));
            break;
        }
        std::size_t i = j;
        while (i > 0 && !py_isspace(cps[i - 1])) --i;
        out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j))));
        j = i;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
    std::vector<char32_t> cps = decode_utf8(s);
    std::vector<std::string> out;
    std::size_t i = 0, start = 0, n = cps.size();
    auto is_break = [](char32_t c) {
        return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    };
    while (i < n) {
        if (is_break(cps[i])) {
            std::size_t eol = i;
            if (cps[i] == '\r' && i + 1 < n && cps[i + 1] == '\n') ++i;
            ++i;
            std::size_t stop = keepends ? i : eol;
            out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(start), cps.begin() + static_cast<std::ptrdiff_t>(stop))));
            start = i;
        } else {
            ++i;
        }
    }
    if (start < n) out.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(start), cps.end())));
    return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view rep, std::int64_t count) {
    std::string out;
    if (old.empty()) {
        std::int64_t done = 0;
        std::vector<char32_t> cps = decode_utf8(s);
        for (std::size_t k = 0; k <= cps.size(); ++k) {
            if (count < 0 || done < count) { out += rep; ++done; }
            if (k < cps.size()) append_utf8(out, cps[k]);
            check_size(out.size());
        }
        return out;
    }
    std::size_t pos = 0;
    std::int64_t done = 0;
    while (count < 0 || done < count) {
        std::size_t f = find_text(s, old, pos);
        if (f == std::string_view::npos) break;
        out.append(s.substr(pos, f - pos));
        out.append(rep);
        check_size(out.size());
        pos = f + old.size();
        ++done;
    }
    out.append(s.substr(pos));
    check_size(out.size());
    return out;
}

std::size_t find_text(std::string_view hay, std::string_view needle, std::size_t from) {
    if (from > hay.size()) return std::string_view::npos;
    if (needle.empty()) return from;
    const void* at = memmem(hay.data() + from, hay.size() - from, needle.data(), needle.size());
    const std::size_t found = at ? static_cast<std::size_t>(static_cast<const char*>(at) - hay.data()) : std::string_view::npos;
    charge_bytes((at ? found + needle.size() : hay.size()) - from + needle.size());
    return found;
}

std::size_t rfind_text(std::string_view hay, std::string_view needle) {
    if (needle.size() > hay.size()) return std::string_view::npos;
    if (needle.empty()) return hay.size();
    charge_bytes(hay.size() + needle.size());
    const std::string rh(hay.rbegin(), hay.rend()), rn(needle.rbegin(), needle.rend());
    const std::size_t r = find_text(rh, rn);
    return r == std::string_view::npos ? r : hay.size() - r - needle.size();
}

// ---------------------------------------------------------------- str / repr
std::string kind_name(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: case Kind::BigInt: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::List: return v.gen ? "generator" : "list";
        case Kind::Tuple: return "tuple";
        case Kind::Dict: return "dict";
        case Kind::Namespace: return "Namespace";
        case Kind::Callable: return "function";
    }
    return "object";
}

bool truthy(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: case Kind::None: return false;
        case Kind::Bool: return v.b;
        case Kind::Int: return v.i != 0;
        case Kind::BigInt: return true;  // never 0: it lies outside int64
        case Kind::Float: return v.f != 0.0;
        case Kind::String: return !v.s.empty();
        case Kind::List: case Kind::Tuple: return v.gen || !v.list->items.empty();
        case Kind::Dict: return !v.dict->items.empty();
        case Kind::Namespace: case Kind::Callable: return true;
    }
    return false;
}

std::string py_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    bool neg = false;
    std::size_t p = 0;
    if (sci[0] == '-') { neg = true; p = 1; }
    std::size_t epos = sci.find('e');
    std::string digits;
    for (std::size_t k = p; k < epos; ++k)
        if (sci[k] != '.') digits.push_back(sci[k]);
    int exp = std::stoi(sci.substr(epos + 1));
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    int decpt = exp + 1;
    std::string out = neg ? "-" : "";
    if (d == 0.0) return out + "0.0";
    if (decpt <= -4 || decpt > 16) {
        out += digits[0];
        if (digits.size() > 1) { out += '.'; out += digits.substr(1); }
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += eb;
    } else if (decpt <= 0) {
        out += "0.";
        out.append(static_cast<std::size_t>(-decpt), '0');
        out += digits;
    } else if (static_cast<std::size_t>(decpt) >= digits.size()) {
        out += digits;
        out.append(static_cast<std::size_t>(decpt) - digits.size(), '0');
        out += ".0";
    } else {
        out += digits.substr(0, static_cast<std::size_t>(decpt));
        out += '.';
        out += digits.substr(static_cast<std::size_t>(decpt));
    }
    return out;
}

static bool py_isprintable(char32_t c) {
    if (c == ' ') return true;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
        case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
        case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
            return false;
        default:
            return true;
    }
}

static void repr_string(std::string& out, std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char q = (has_single && !has_double) ? '"' : '\'';
    out += q;
    for (char32_t c : decode_utf8(s)) {
        if (c == static_cast<char32_t>(q) || c == '\\') { out += '\\'; out += static_cast<char>(c); }
        else if (c == '\t') out += "\\t";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !py_isprintable(c))) {
            char buf[16];
            if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
            out += buf;
        } else {
            append_utf8(out, c);
        }
    }
    out += q;
}

// Appends repr(v): nested values write into one string, so a deep value is not copied once per level.
static void repr_into(std::string& out, const Value& v) {
    charge_steps(1);
    check_size(out.size());
    switch (v.kind) {
        case Kind::Undefined: out += "Undefined"; return;
        case Kind::None: out += "None"; return;
        case Kind::Bool: out += v.b ? "True" : "False"; return;
        case Kind::Int: out += std::to_string(v.i); return;
        case Kind::BigInt: out += v.s.str(); return;
        case Kind::Float: out += py_float_repr(v.f); return;
        case Kind::String: repr_string(out, v.s); return;
        case Kind::List:
        case Kind::Tuple: {
            if (v.gen) fail("cannot print a generator object (add '|list')");
            out += v.kind == Kind::List ? "[" : "(";
            const auto& items = v.list->items;
            for (std::size_t k = 0; k < items.size(); ++k) {
                if (k) out += ", ";
                repr_into(out, items[k]);
            }
            if (v.kind == Kind::Tuple && items.size() == 1) out += ",";
            out += v.kind == Kind::List ? "]" : ")";
            return;
        }
        case Kind::Dict: {
            out += "{";
            bool first = true;
            for (const auto& kv : v.dict->items) {
                if (!first) out += ", ";
                first = false;
                repr_string(out, kv.first);
                out += ": ";
                repr_into(out, kv.second);
            }
            out += "}";
            return;
        }
        case Kind::Namespace: {
            out += "<Namespace ";
            repr_into(out, Value::make_dict(v.ns->attrs));
            out += ">";
            return;
        }
        case Kind::Callable: fail("cannot print a function object ('" + v.fn->name + "')");
    }
}

std::string to_repr(const Value& v) {
    std::string out;
    repr_into(out, v);
    check_size(out.size());
    charge_bytes(out.size());
    return out;
}

std::string to_str(const Value& v) {
    if (v.kind == Kind::String) {
        charge_bytes(v.s.size());  // the copy
        return v.s;
    }
    if (v.kind == Kind::Undefined) return {};
    return to_repr(v);
}

// ---------------------------------------------------------------- comparison
static bool num_of(const Value& v, double& d, std::int64_t& i, bool& is_int) {
    if (v.kind == Kind::Int) { i = v.i; d = static_cast<double>(v.i); is_int = true; return true; }
    if (v.kind == Kind::Bool) { i = v.b ? 1 : 0; d = static_cast<double>(i); is_int = true; return true; }
    if (v.kind == Kind::Float) { d = v.f; is_int = false; return true; }
    return false;
}

// Python compares a big int with a float exactly: equal only to the float of that exact integer value.
static bool big_equals_float(const Value& big, double f) {
    if (!std::isfinite(f) || f != std::floor(f)) return false;
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.0f", f);  // an integral double prints exactly
    return big.s == std::string_view(buf);
}

// -1/0/1 for two integers of which at least one is beyond int64 (canonical digits: the longer is the larger).
static int compare_big(const Value& a, const Value& b) {
    auto sign_digits = [](const Value& v, std::string& digits) {
        digits = v.kind == Kind::BigInt ? v.s.str() : std::to_string(v.kind == Kind::Bool ? std::int64_t{v.b} : v.i);
        bool neg = !digits.empty() && digits[0] == '-';
        if (neg) digits.erase(0, 1);
        return neg;
    };
    std::string x, y;
    bool nx = sign_digits(a, x), ny = sign_digits(b, y);
    if (nx != ny) return nx ? -1 : 1;
    int mag = x.size() != y.size() ? (x.size() < y.size() ? -1 : 1) : (x < y ? -1 : x > y ? 1 : 0);
    return nx ? -mag : mag;
}

// A big int against a float, exactly as Python compares them; 2 (every ordering false) against NaN.
static int compare_big_float(const Value& big, double f) {
    if (std::isnan(f)) return 2;
    const bool big_negative = big.s.str()[0] == '-';
    // Past int64 the big int is larger in magnitude than any float below 2^63; from 2^53 on every double is an integer.
    if (std::isinf(f) || std::fabs(f) < 9.2e18) return std::isinf(f) ? (f > 0 ? -1 : 1) : (big_negative ? -1 : 1);
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.0f", f);
    return compare_big(big, Value::big_integer(buf));
}

bool equals(const Value& a, const Value& b) {
    if (a.kind == Kind::BigInt || b.kind == Kind::BigInt) {
        const Value& big = a.kind == Kind::BigInt ? a : b;
        const Value& other = a.kind == Kind::BigInt ? b : a;
        if (other.kind == Kind::BigInt) return a.s == b.s;
        if (other.kind == Kind::Float) return big_equals_float(big, other.f);
        return false;  // an int64 or a bool never equals an integer outside int64
    }
    double da, db;
    std::int64_t ia, ib;
    bool inta, intb;
    if (num_of(a, da, ia, inta) && num_of(b, db, ib, intb)) {
        if (inta && intb) return ia == ib;
        return da == db;
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case Kind::Undefined: case Kind::None: return true;
        case Kind::String:
            if (a.s.size() == b.s.size()) charge_bytes(a.s.size());
            return a.s == b.s;
        case Kind::List: case Kind::Tuple: {
            if (a.gen || b.gen) return a.list == b.list;
            const auto& x = a.list->items;
            const auto& y = b.list->items;
            if (x.size() != y.size()) return false;
            charge_steps(x.size());
            for (std::size_t k = 0; k < x.size(); ++k)
                if (!equals(x[k], y[k])) return false;
            return true;
        }
        case Kind::Dict: {
            if (a.dict->items.size() != b.dict->items.size()) return false;
            charge_steps(a.dict->items.size());
            for (const auto& kv : a.dict->items) {
                const Value* o = b.dict->find(kv.first);
                if (!o || !equals(kv.second, *o)) return false;
            }
            return true;
        }
        case Kind::Namespace: return a.ns == b.ns;
        case Kind::Callable: return a.fn == b.fn;
        default: return false;
    }
}

int compare(const Value& a, const Value& b, std::string_view op) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    if ((a.kind == Kind::BigInt && b.is_number()) || (b.kind == Kind::BigInt && a.is_number())) {
        if (a.kind == Kind::Float) return -compare_big_float(b, a.f);
        if (b.kind == Kind::Float) return compare_big_float(a, b.f);
        return compare_big(a, b);
    }
    double da, db;
    std::int64_t ia, ib;
    bool inta, intb;
    if (num_of(a, da, ia, inta) && num_of(b, db, ib, intb)) {
        if (inta && intb) return ia < ib ? -1 : ia > ib ? 1 : 0;
        if (std::isnan(da) || std::isnan(db)) return 2;  // every ordering comparison is false
        return da < db ? -1 : da > db ? 1 : 0;
    }
    if (a.kind == Kind::String && b.kind == Kind::String) {
        charge_bytes(std::min(a.s.size(), b.s.size()));
        int c = a.s.str().compare(b.s.str());
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.kind == b.kind && a.is_seq() && !a.gen && !b.gen) {
        const auto& x = a.list->items;
        const auto& y = b.list->items;
        charge_steps(std::min(x.size(), y.size()));
        for (std::size_t k = 0; k < x.size() && k < y.size(); ++k) {
            if (equals(x[k], y[k])) continue;
            return compare(x[k], y[k], op);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    fail("'" + std::string(op) + "' not supported between instances of '" + kind_name(a) + "' and '" + kind_name(b) + "'");
}

// ---------------------------------------------------------------- JSON
Value from_json(const nlohmann::ordered_json& j, int depth) {
    if (depth > kMaxValueDepth) fail("context JSON nesting exceeds the depth limit of " + std::to_string(kMaxValueDepth));
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return Value::none();
        case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<std::int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            auto u = j.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return Value::big_integer(std::to_string(u));
            return Value::integer(static_cast<std::int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
        case nlohmann::ordered_json::value_t::binary: {  // only parse_context_json makes these: an integer beyond 64 bits
            const auto& bin = j.get_binary();
            if (!bin.has_subtype() || bin.subtype() != kBigIntSubtype) fail("unsupported JSON value in context");
            return Value::big_integer(std::string(bin.begin(), bin.end()));
        }
        case nlohmann::ordered_json::value_t::string: {
            const auto& str = j.get_ref<const std::string&>();
            if (!is_valid_utf8(str)) fail("context string is not valid UTF-8");
            return Value::string(str);
        }
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (const auto& x : j) items.push_back(from_json(x, depth + 1));
            return Value::make_list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json(it.value(), depth + 1));
            return Value::make_dict(std::move(d));
        }
        default: fail("unsupported JSON value in context");
    }
}

// Builds the document as nlohmann's own DOM parser does, except for integer literals beyond 64 bits: nlohmann hands
// those over as doubles (number_float, with the literal's text), Python's json keeps them exact.
namespace {
class ContextSax {
public:
    using json = nlohmann::ordered_json;
    json root;

    bool null() { add(nullptr); return true; }
    bool boolean(bool v) { add(v); return true; }
    bool number_integer(json::number_integer_t v) { add(v); return true; }
    bool number_unsigned(json::number_unsigned_t v) { add(v); return true; }
    bool number_float(json::number_float_t v, const json::string_t& text) {
        const bool integer_literal = text.find_first_of(".eE") == json::string_t::npos;
        if (integer_literal) add(json::binary(json::binary_t::container_type(text.begin(), text.end()), kBigIntSubtype));
        else add(v);
        return true;
    }
    bool string(json::string_t& v) { add(std::move(v)); return true; }
    bool binary(json::binary_t& v) { add(json::binary(std::move(v))); return true; }
    bool start_object(std::size_t) { open_.push_back(add(json::object())); return true; }
    bool key(json::string_t& k) { key_ = std::move(k); return true; }
    bool end_object() { open_.pop_back(); return true; }
    bool start_array(std::size_t) { open_.push_back(add(json::array())); return true; }
    bool end_array() { open_.pop_back(); return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

private:
    // Containers still open, innermost last: nothing is added to an outer one while an inner one is open, so these
    // pointers stay valid.
    std::vector<json*> open_;
    json::string_t key_;

    json* add(json v) {
        if (open_.empty()) { root = std::move(v); return &root; }
        json& parent = *open_.back();
        if (parent.is_array()) { parent.push_back(std::move(v)); return &parent.back(); }
        json& slot = parent[key_];
        slot = std::move(v);
        return &slot;
    }
};
}  // namespace

nlohmann::ordered_json parse_context_json(std::string_view text) {
    ContextSax sax;
    if (!nlohmann::ordered_json::sax_parse(text, &sax)) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
    return std::move(sax.root);
}

static void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (char32_t c : decode_utf8(s)) {
        switch (c) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        char buf[16];
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
            if (c >= 0x10000) {
                char32_t v = c - 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)), static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            }
            out += buf;
        } else {
            append_utf8(out, c);
        }
    }
    out += '"';
}

static void json_value(std::string& out, const Value& v, const JsonOptions& o, int level) {
    charge_steps(1);
    check_size(out.size());
    auto newline = [&](int lvl) {
        out += '\n';
        for (int k = 0; k < lvl; ++k) {
            out += o.indent;
            check_size(out.size());  // an indent string may be long: stop before the level multiplies it
        }
    };
    switch (v.kind) {
        case Kind::None: out += "null"; return;
        case Kind::Bool: out += v.b ? "true" : "false"; return;
        case Kind::Int: out += std::to_string(v.i); return;
        case Kind::BigInt: out += v.s.str(); return;
        case Kind::Float:
            if (std::isnan(v.f)) out += "NaN";
            else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
            else out += py_float_repr(v.f);
            return;
        case Kind::String: json_string(out, v.s, o.ensure_ascii); return;
        case Kind::List:
        case Kind::Tuple: {
            if (v.gen) fail("Object of type generator is not JSON serializable");
            const auto& items = v.list->items;
            if (items.empty()) { out += "[]"; return; }
            out += '[';
            for (std::size_t k = 0; k < items.size(); ++k) {
                if (k) out += o.item_sep;
                if (o.has_indent) newline(level + 1);
                json_value(out, items[k], o, level + 1);
            }
            if (o.has_indent) newline(level);
            out += ']';
            return;
        }
        case Kind::Dict: {
            const auto& items = v.dict->items;
            if (items.empty()) { out += "{}"; return; }
            std::vector<const std::pair<std::string, Value>*> order;
            for (const auto& kv : items) order.push_back(&kv);
            if (o.sort_keys)
                std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
            out += '{';
            bool first = true;
            for (const auto* kv : order) {
                if (!first) out += o.item_sep;
                first = false;
                if (o.has_indent) newline(level + 1);
                json_string(out, kv->first, o.ensure_ascii);
                out += o.key_sep;
                json_value(out, kv->second, o, level + 1);
            }
            if (o.has_indent) newline(level);
            out += '}';
            return;
        }
        case Kind::Undefined: fail("Object of type Undefined is not JSON serializable");
        case Kind::Namespace: fail("Object of type Namespace is not JSON serializable");
        case Kind::Callable: fail("Object of type function is not JSON serializable");
    }
}

std::string to_json(const Value& v, const JsonOptions& opt) {
    std::string out;
    json_value(out, v, opt, 0);
    check_size(out.size());
    charge_bytes(out.size());
    return out;
}

}  // namespace colibri::jinja
