// Evaluator: statements and expressions with jinja2's scoping (a fresh scope per loop iteration,
// macro and block-set scopes; `if` opens none), Python operator semantics and jinja2's default
// Undefined (prints as '', iterates as empty, fails on attribute access, arithmetic and calls).
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/text/jinja.h"

namespace colibri::jinja {

// ---------------------------------------------------------------- scopes
const Value* Scope::find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get())
        for (const auto& kv : s->vars)
            if (kv.first == name) return &kv.second;
    return nullptr;
}

void Scope::set(const std::string& name, Value v) {
    for (auto& kv : vars)
        if (kv.first == name) { kv.second = std::move(v); return; }
    vars.emplace_back(name, std::move(v));
}

static ScopeP child(const ScopeP& parent) {
    auto s = std::make_shared<Scope>();
    s->parent = parent;
    return s;
}

static bool contains_namespace(const Value& v) {
    charge_steps(1);  // a value's items may be shared many times over: each visit counts
    if (v.kind == Kind::Namespace) return true;
    if (v.is_seq()) {
        for (const auto& x : v.list->items)
            if (contains_namespace(x)) return true;
    } else if (v.kind == Kind::Dict) {
        for (const auto& kv : v.dict->items)
            if (contains_namespace(kv.second)) return true;
    }
    return false;
}

// ---------------------------------------------------------------- expressions
Value Interp::lookup(const std::string& name, const ScopeP& scope) {
    if (const Value* v = scope->find(name)) return *v;
    Value g = make_global(name);
    if (!g.is_undefined()) return g;
    return Value::undefined("'" + name + "' is undefined");
}

static std::int64_t as_int_index(const Value& v, const char* what) {
    if (v.kind == Kind::Int) return v.i;
    if (v.kind == Kind::Bool) return v.b ? 1 : 0;
    if (v.kind == Kind::BigInt)  // past either end of any sequence: Python clamps it like any large index
        return v.s.str()[0] == '-' ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
    if (v.is_undefined()) fail_undefined(v);
    fail(std::string(what) + " must be integers or None, not " + kind_name(v));
}

Value Interp::slice(const Value& obj, const Expr& sl, const ScopeP& scope) {
    if (obj.is_undefined()) fail_undefined(obj);
    Value parts[3];
    for (int k = 0; k < 3; ++k) parts[k] = sl.a[k] ? eval(*sl.a[k], scope) : Value::none();
    std::int64_t step = parts[2].is_none() ? 1 : as_int_index(parts[2], "slice indices");
    if (step == 0) fail("slice step cannot be zero");
    std::vector<Value> items;
    std::vector<char32_t> cps;
    std::int64_t n;
    if (obj.kind == Kind::String) {
        cps = decode_utf8(obj.s);
        n = static_cast<std::int64_t>(cps.size());
    } else if (obj.is_seq() && !obj.gen) {
        n = static_cast<std::int64_t>(obj.list->items.size());
    } else {
        fail("'" + kind_name(obj) + "' object is not subscriptable with a slice");
    }
    auto adjust = [&](const Value& v, std::int64_t def_pos, std::int64_t def_neg) -> std::int64_t {
        if (v.is_none()) return step > 0 ? def_pos : def_neg;
        std::int64_t x = as_int_index(v, "slice indices");
        if (x < 0) {
            x += n;
            if (x < 0) x = step < 0 ? -1 : 0;
        } else if (x >= n) {
            x = step < 0 ? n - 1 : n;
        }
        return x;
    };
    std::int64_t start = adjust(parts[0], 0, n - 1);
    std::int64_t stop = adjust(parts[1], n, -1);
    std::vector<std::int64_t> idx;
    // The distance left is compared before stepping: a step near the int64 limits must not overflow k.
    if (step > 0) for (std::int64_t k = start; k < stop; k = stop - k > step ? k + step : stop) idx.push_back(k);
    else
        for (std::int64_t k = start; k > stop; k = step != std::numeric_limits<std::int64_t>::min() && k - stop > -step ? k + step : stop)
            idx.push_back(k);
    Interp::step(idx.size());
    if (obj.kind == Kind::String) {
        std::string out;
        for (auto k : idx) append_utf8(out, cps[static_cast<std::size_t>(k)]);
        return Value::string(std::move(out));
    }
    for (auto k : idx) items.push_back(obj.list->items[static_cast<std::size_t>(k)]);
    return Value::make_list(std::move(items), obj.kind == Kind::Tuple);
}

Value Interp::getattr(const Value& obj, const std::string& name) {
    switch (obj.kind) {
        case Kind::Undefined: fail_undefined(obj);
        case Kind::Dict: {
            Value m = bound_method(obj, name);
            if (!m.is_undefined() || !m.s.empty()) return m;
            if (const Value* v = obj.dict->find(name)) return *v;
            return Value::undefined("'dict object' has no attribute '" + name + "'");
        }
        case Kind::Namespace:
            if (const Value* v = obj.ns->attrs.find(name)) return *v;
            return Value::undefined("'Namespace object' has no attribute '" + name + "'");
        default: {
            Value m = bound_method(obj, name);
            if (!m.is_undefined() || !m.s.empty()) return m;
            return Value::undefined("'" + kind_name(obj) + " object' has no attribute '" + name + "'");
        }
    }
}

Value Interp::getitem(const Value& obj, const Value& key) {
    switch (obj.kind) {
        case Kind::Undefined: fail_undefined(obj);
        case Kind::Dict:
            if (key.is_string()) {
                if (const Value* v = obj.dict->find(key.s)) return *v;
                Value m = bound_method(obj, key.s);
                if (!m.is_undefined() || !m.s.empty()) return m;
            }
            return Value::undefined("'dict object' has no attribute '" + to_str(key) + "'");
        case Kind::List:
        case Kind::Tuple:
        case Kind::String: {
            if (obj.gen) fail("'generator' object is not subscriptable");
            if (key.kind == Kind::Int || key.kind == Kind::Bool) {
                std::int64_t i = key.kind == Kind::Int ? key.i : (key.b ? 1 : 0);
                if (obj.kind == Kind::String) {
                    std::vector<char32_t> cps = decode_utf8(obj.s);
                    std::int64_t n = static_cast<std::int64_t>(cps.size());
                    if (i < 0) i += n;
                    if (i < 0 || i >= n) return Value::undefined("'str object' has no element " + std::to_string(key.i));
                    std::string out;
                    append_utf8(out, cps[static_cast<std::size_t>(i)]);
                    return Value::string(std::move(out));
                }
                std::int64_t n = static_cast<std::int64_t>(obj.list->items.size());
                if (i < 0) i += n;
                if (i < 0 || i >= n) return Value::undefined("'" + kind_name(obj) + " object' has no element " + std::to_string(key.i));
                return obj.list->items[static_cast<std::size_t>(i)];
            }
            if (key.is_string()) return getattr(obj, key.s);
            if (key.is_undefined()) fail_undefined(key);
            return Value::undefined("'" + kind_name(obj) + " object' has no element " + to_repr(key));
        }
        case Kind::Namespace:
            if (key.is_string()) return getattr(obj, key.s);
            return Value::undefined("'Namespace object' has no element " + to_repr(key));
        default:
            if (key.is_string()) return getattr(obj, key.s);
            return Value::undefined("'" + kind_name(obj) + " object' has no element " + to_repr(key));
    }
}

Value Interp::call(const Value& callee, Args& args) {
    if (callee.kind == Kind::Callable) return callee.fn->fn(*this, args);
    if (callee.is_undefined()) fail_undefined(callee);
    fail("'" + kind_name(callee) + "' object is not callable");
}

std::vector<Value> Interp::iterate(const Value& v) {
    std::vector<Value> out;
    switch (v.kind) {
        case Kind::Undefined: return out;
        case Kind::List: case Kind::Tuple:
            charge_bytes(v.list->items.size() * sizeof(Value));  // the copy
            return v.list->items;
        case Kind::Dict:
            for (const auto& kv : v.dict->items) out.push_back(Value::string(kv.first));
            return out;
        case Kind::String:
            for (char32_t c : decode_utf8(v.s)) {
                std::string ch;
                append_utf8(ch, c);
                out.push_back(Value::string(std::move(ch)));
            }
            return out;
        default: fail("'" + kind_name(v) + "' object is not iterable");
    }
}

bool Interp::contains(const Value& container, const Value& item) {
    switch (container.kind) {
        case Kind::Undefined: return false;
        case Kind::String:
            if (item.is_undefined()) fail_undefined(item);
            if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + kind_name(item));
            return find_text(container.s, item.s) != std::string::npos;
        case Kind::List: case Kind::Tuple:
            step(container.list->items.size());
            for (const auto& x : container.list->items)
                if (equals(x, item)) return true;
            return false;
        case Kind::Dict:
            if (item.is_string()) return container.dict->find(item.s) != nullptr;
            if (item.is_seq() || item.kind == Kind::Dict) fail("unhashable type: '" + kind_name(item) + "'");
            return false;
        default:
            fail("argument of type '" + kind_name(container) + "' is not iterable");
    }
}

// -x of an integer's decimal text (a BigInt stays beyond int64 when negated).
static std::string negate_digits(std::string_view digits) {
    return digits.substr(0, 1) == "-" ? std::string(digits.substr(1)) : "-" + std::string(digits);
}

// The exact result of +, - or * on two int64 (Python ints do not overflow): an Int, or a BigInt past int64.
static Value wide_integer(__int128 r) {
    if (r >= std::numeric_limits<std::int64_t>::min() && r <= std::numeric_limits<std::int64_t>::max())
        return Value::integer(static_cast<std::int64_t>(r));
    const bool neg = r < 0;
    unsigned __int128 m = neg ? -static_cast<unsigned __int128>(r) : static_cast<unsigned __int128>(r);
    std::string digits;
    for (; m; m /= 10) digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    return Value::big_integer((neg ? "-" : "") + digits);
}

static bool num_parts(const Value& v, bool& is_int, std::int64_t& i, double& d) {
    if (v.kind == Kind::Int) { is_int = true; i = v.i; d = static_cast<double>(i); return true; }
    if (v.kind == Kind::Bool) { is_int = true; i = v.b; d = static_cast<double>(i); return true; }
    if (v.kind == Kind::Float) { is_int = false; d = v.f; return true; }
    return false;
}

static double py_fmod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
}

// Python arithmetic on two numbers (a bool counts as an int); nothing for an operator numbers do not have.
static std::optional<Value> number_arith(const std::string& op, bool ia, std::int64_t xa, double da, bool ib,
                                         std::int64_t xb, double db) {
    bool both_int = ia && ib;
    if (op == "+") {
        if (both_int) return wide_integer(static_cast<__int128>(xa) + xb);
        return Value::real(da + db);
    }
    if (op == "-") {
        if (both_int) return wide_integer(static_cast<__int128>(xa) - xb);
        return Value::real(da - db);
    }
    if (op == "*") {
        if (both_int) return wide_integer(static_cast<__int128>(xa) * xb);
        return Value::real(da * db);
    }
    if (op == "/") {
        if (db == 0) fail("division by zero");
        return Value::real(da / db);
    }
    if (op == "//") {
        if (db == 0) fail("integer division or modulo by zero");
        if (both_int) {
            if (xa == std::numeric_limits<std::int64_t>::min() && xb == -1) return wide_integer(-static_cast<__int128>(xa));
            std::int64_t q = xa / xb;
            if ((xa % xb != 0) && ((xa < 0) != (xb < 0))) --q;
            return Value::integer(q);
        }
        return Value::real(std::floor(da / db));
    }
    if (op == "%") {
        if (db == 0) fail("integer division or modulo by zero");
        if (both_int) {
            if (xb == -1) return Value::integer(0);
            std::int64_t m = xa % xb;
            if (m != 0 && ((m < 0) != (xb < 0))) m += xb;
            return Value::integer(m);
        }
        return Value::real(py_fmod(da, db));
    }
    if (op == "**") {
        if (both_int && xb >= 0) {
            std::int64_t r = 1, base = xa, e = xb;
            while (e > 0) {
                if (e & 1) { if (__builtin_mul_overflow(r, base, &r)) fail("integer overflow"); }
                e >>= 1;
                if (e > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
            }
            return Value::integer(r);
        }
        if (da == 0 && db < 0) fail("0.0 cannot be raised to a negative power");
        double r = std::pow(da, db);
        if (std::isnan(r) && !std::isnan(da) && !std::isnan(db)) fail("unsupported: complex result of '**'");
        return Value::real(r);
    }
    return std::nullopt;
}

// + and * on strings and lists (concatenation, repetition by an int); nothing for any other pair.
static std::optional<Value> sequence_arith(Interp& in, const std::string& op, const Value& a, const Value& b, bool na,
                                           bool ia, std::int64_t xa, bool nb, bool ib, std::int64_t xb) {
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            check_size(a.s.size() + b.s.size());
            return Value::string(a.s.str() + b.s.str());
        }
        if (a.kind == b.kind && a.is_seq() && !a.gen && !b.gen) {
            if (a.list->items.size() + b.list->items.size() > kMaxListItems)
                fail("list exceeds the size limit of " + std::to_string(kMaxListItems) + " items");
            std::vector<Value> items = a.list->items;
            items.insert(items.end(), b.list->items.begin(), b.list->items.end());
            in.step(items.size());
            return Value::make_list(std::move(items), a.kind == Kind::Tuple);
        }
        if (a.is_string()) fail("can only concatenate str (not \"" + kind_name(b) + "\") to str");
        return std::nullopt;
    }
    if (op == "*") {
        const Value* seq = nullptr;
        std::int64_t times = 0;
        if ((a.is_string() || (a.is_seq() && !a.gen)) && nb && ib) { seq = &a; times = xb; }
        else if ((b.is_string() || (b.is_seq() && !b.gen)) && na && ia) { seq = &b; times = xa; }
        if (!seq) return std::nullopt;
        if (times < 0) times = 0;
        if (seq->is_string()) {
            if (!seq->s.empty() && static_cast<std::uint64_t>(times) > kMaxOutputBytes / seq->s.size()) check_size(kMaxOutputBytes + 1);
            std::string out;
            out.reserve(seq->s.size() * static_cast<std::size_t>(times));
            for (std::int64_t k = 0; k < times; ++k) out += seq->s.str();
            return Value::string(std::move(out));
        }
        const auto& src = seq->list->items;
        if (!src.empty() && static_cast<std::uint64_t>(times) > kMaxListItems / src.size())
            fail("list exceeds the size limit of " + std::to_string(kMaxListItems) + " items");
        std::vector<Value> items;
        for (std::int64_t k = 0; k < times; ++k) items.insert(items.end(), src.begin(), src.end());
        in.step(items.size());
        return Value::make_list(std::move(items), seq->kind == Kind::Tuple);
    }
    return std::nullopt;
}

Value Interp::arith(const std::string& op, const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    bool ia = false, ib = false;
    std::int64_t xa = 0, xb = 0;
    double da = 0, db = 0;
    if ((a.kind == Kind::BigInt && b.is_number()) || (b.kind == Kind::BigInt && a.is_number()))
        fail("unsupported: arithmetic on an integer beyond 64 bits ('" + op + "')");
    bool na = num_parts(a, ia, xa, da), nb = num_parts(b, ib, xb, db);
    auto bad = [&]() -> Value {
        fail("unsupported operand type(s) for " + op + ": '" + kind_name(a) + "' and '" + kind_name(b) + "'");
    };
    if (na && nb) {
        if (std::optional<Value> r = number_arith(op, ia, xa, da, ib, xb, db)) return *r;
        return bad();
    }
    if (std::optional<Value> r = sequence_arith(*this, op, a, b, na, ia, xa, nb, ib, xb)) return *r;
    if (op == "%" && a.is_string()) fail("unsupported: printf-style string formatting ('%' on a string)");
    return bad();
}

static bool compare_op(Interp& in, const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in") return in.contains(r, l);
    if (op == "notin") return !in.contains(r, l);
    int c = compare(l, r, op);
    if (c == 2) return false;
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;  // ">="
}

static Args eval_args(Interp& in, const Expr& e, std::size_t first, const ScopeP& scope) {
    Args args;
    for (std::size_t k = first; k < e.a.size(); ++k) args.pos.push_back(in.eval(*e.a[k], scope));
    for (const auto& kv : e.kw) args.kw.emplace_back(kv.first, in.eval(*kv.second, scope));
    return args;
}

namespace {
// One level of evaluation recursion: the parser bounds each tree, this bounds their nesting through macro calls.
struct EvalFrame {
    Interp& in;
    explicit EvalFrame(Interp& i) : in(i) {
        if (in.eval_depth >= kMaxEvalDepth)
            fail("template evaluation nests deeper than the limit of " + std::to_string(kMaxEvalDepth) + " levels");
        // The stack grows down on every platform this builds for.
        const auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        if (in.stack_base != 0 && here < in.stack_base && in.stack_base - here > kMaxEvalStackBytes)
            fail("template evaluation nests deeper than the stack limit of " + std::to_string(kMaxEvalStackBytes >> 20) +
                 " MiB (" + std::to_string(in.eval_depth) + " levels)");
        ++in.eval_depth;
    }
    ~EvalFrame() { --in.eval_depth; }
    EvalFrame(const EvalFrame&) = delete;
    EvalFrame& operator=(const EvalFrame&) = delete;
};

// Appends rendered text, counting the copy.
void emit(std::string& out, std::string_view text) {
    charge_bytes(text.size());
    out += text;
    check_size(out.size());
}
}  // namespace

Value Interp::eval_filter_chain(const Expr& e, const Value& root, const ScopeP& scope) {
    EvalFrame frame(*this);
    step();
    Value input = e.a[0] ? (e.a[0]->k == EK::Filter ? eval_filter_chain(*e.a[0], root, scope) : eval(*e.a[0], scope)) : root;
    Args args = eval_args(*this, e, 1, scope);
    return call_filter(*this, e.name, input, args);
}

Value Interp::eval(const Expr& e, const ScopeP& scope) {
    EvalFrame frame(*this);
    step();
    switch (e.k) {
        case EK::Literal: return e.lit;
        case EK::Name: return lookup(e.name, scope);
        case EK::List:
        case EK::Tuple: {
            std::vector<Value> items;
            items.reserve(e.a.size());
            for (const auto& x : e.a) items.push_back(eval(*x, scope));
            return Value::make_list(std::move(items), e.k == EK::Tuple);
        }
        case EK::DictLit: {
            Dict d;
            for (std::size_t k = 0; k + 1 < e.a.size(); k += 2) {
                Value key = eval(*e.a[k], scope);
                if (!key.is_string()) fail("unsupported: dict literal key of type '" + kind_name(key) + "' (only string keys)");
                d.set(key.s, eval(*e.a[k + 1], scope));
            }
            return Value::make_dict(std::move(d));
        }
        case EK::Getattr: return getattr(eval(*e.a[0], scope), e.name);
        case EK::Getitem: {
            Value obj = eval(*e.a[0], scope);
            if (e.a[1]->k == EK::Slice) return slice(obj, *e.a[1], scope);
            return getitem(obj, eval(*e.a[1], scope));
        }
        case EK::Slice: fail("unexpected slice expression");
        case EK::Call: {
            Value callee = eval(*e.a[0], scope);
            Args args = eval_args(*this, e, 1, scope);
            return call(callee, args);
        }
        case EK::Filter: return eval_filter_chain(e, Value::undefined(), scope);
        case EK::Test: {
            Value v = eval(*e.a[0], scope);
            Args args = eval_args(*this, e, 1, scope);
            bool r = call_test(*this, e.name, v, args);
            return Value::boolean(e.negated ? !r : r);
        }
        case EK::Not: return Value::boolean(!truthy(eval(*e.a[0], scope)));
        case EK::Neg:
        case EK::Pos: {
            Value v = eval(*e.a[0], scope);
            if (v.is_undefined()) fail_undefined(v);
            bool neg = e.k == EK::Neg;
            if (v.kind == Kind::Int) {
                if (neg && v.i == std::numeric_limits<std::int64_t>::min()) return Value::big_integer(negate_digits(std::to_string(v.i)));
                return Value::integer(neg ? -v.i : v.i);
            }
            if (v.kind == Kind::Bool) return Value::integer(neg ? -static_cast<int>(v.b) : static_cast<int>(v.b));
            if (v.kind == Kind::Float) return Value::real(neg ? -v.f : v.f);
            if (v.kind == Kind::BigInt) return neg ? Value::big_integer(negate_digits(v.s)) : v;
            fail(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + kind_name(v) + "'");
        }
        case EK::Binary: {
            Value l = eval(*e.a[0], scope);
            Value r = eval(*e.a[1], scope);
            return arith(e.name, l, r);
        }
        case EK::And: {
            Value l = eval(*e.a[0], scope);
            if (!truthy(l)) return l;
            return eval(*e.a[1], scope);
        }
        case EK::Or: {
            Value l = eval(*e.a[0], scope);
            if (truthy(l)) return l;
            return eval(*e.a[1], scope);
        }
        case EK::Compare: {
            Value l = eval(*e.a[0], scope);
            for (std::size_t k = 0; k < e.ops.size(); ++k) {
                Value r = eval(*e.a[k + 1], scope);
                if (!compare_op(*this, e.ops[k], l, r)) return Value::boolean(false);
                l = std::move(r);
            }
            return Value::boolean(true);
        }
        case EK::Concat: {
            std::string out;
            for (const auto& x : e.a) {
                out += to_str(eval(*x, scope));
                check_size(out.size());
            }
            return Value::string(std::move(out));
        }
        case EK::CondExpr: {
            if (truthy(eval(*e.a[0], scope))) return eval(*e.a[1], scope);
            if (e.a[2]) return eval(*e.a[2], scope);
            return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                    " evaluated to false and no else section was defined");
        }
    }
    fail("internal error: unknown expression");
}

// ---------------------------------------------------------------- statements
void Interp::assign(const Expr& target, const Value& v, const ScopeP& scope) {
    if (target.k == EK::Name) {
        scope->set(target.name, v);
        return;
    }
    if (target.k == EK::Getattr) {
        Value ns = lookup(target.a[0]->name, scope);
        if (ns.kind != Kind::Namespace) fail("cannot assign attribute on non-namespace object ('" + target.a[0]->name + "')");
        if (contains_namespace(v)) fail("unsupported: storing a namespace inside a namespace");
        ns.ns->attrs.set(target.name, v);
        if (ns.ns->attrs.depth < v.depth() + 1) {
            if (v.depth() + 1 > kMaxValueDepth) fail("value nesting exceeds the depth limit of " + std::to_string(kMaxValueDepth));
            ns.ns->attrs.depth = v.depth() + 1;
        }
        return;
    }
    if (target.k == EK::Tuple) {
        std::vector<Value> items = iterate(v);
        if (items.size() != target.a.size())
            fail(items.size() > target.a.size()
                     ? "too many values to unpack (expected " + std::to_string(target.a.size()) + ")"
                     : "not enough values to unpack (expected " + std::to_string(target.a.size()) + ", got " + std::to_string(items.size()) + ")");
        for (std::size_t k = 0; k < items.size(); ++k) assign(*target.a[k], items[k], scope);
        return;
    }
    fail("cannot assign to this expression");
}

std::string Interp::render_body(const Body& body, const ScopeP& scope) {
    std::string out;
    exec(body, scope, out);
    return out;
}

Value Interp::call_macro(const MacroDef& def, const ScopeP& defscope, Args& args, const Value* caller) {
    if (++call_depth > kMaxCallDepth) {
        --call_depth;
        fail("macro recursion exceeds the depth limit of " + std::to_string(kMaxCallDepth) + " ('" + def.name + "')");
    }
    struct Guard { int& d; ~Guard() { --d; } } guard{call_depth};
    ScopeP sc = child(defscope);
    const std::size_t n = def.params.size();
    if (args.pos.size() > n && !def.uses_varargs)
        fail("macro '" + def.name + "' takes not more than " + std::to_string(n) + " argument(s)");
    std::vector<bool> bound(n, false);
    for (std::size_t k = 0; k < n && k < args.pos.size(); ++k) {
        sc->set(def.params[k].first, args.pos[k]);
        bound[k] = true;
    }
    Dict extra_kw;
    for (auto& kv : args.kw) {
        std::size_t k = 0;
        while (k < n && def.params[k].first != kv.first) ++k;
        if (k < n) {
            if (bound[k]) fail("macro '" + def.name + "' got multiple values for argument '" + kv.first + "'");
            sc->set(kv.first, kv.second);
            bound[k] = true;
        } else if (kv.first == "caller" && def.uses_caller) {
            sc->set("caller", kv.second);
        } else if (def.uses_kwargs) {
            extra_kw.set(kv.first, kv.second);
        } else {
            fail("macro '" + def.name + "' got an unexpected keyword argument '" + kv.first + "'");
        }
    }
    for (std::size_t k = 0; k < n; ++k) {
        if (bound[k]) continue;
        const auto& p = def.params[k];
        sc->set(p.first, p.second ? eval(*p.second, sc) : Value::undefined("'" + p.first + "' is undefined"));
    }
    if (def.uses_varargs) {
        std::vector<Value> rest;
        for (std::size_t k = n; k < args.pos.size(); ++k) rest.push_back(args.pos[k]);
        sc->set("varargs", Value::make_list(std::move(rest), true));
    }
    if (def.uses_kwargs) sc->set("kwargs", Value::make_dict(std::move(extra_kw)));
    if (caller) sc->set("caller", *caller);
    return Value::string(render_body(def.body, sc));
}

Value Interp::define_macro(const std::shared_ptr<MacroDef>& def, const ScopeP& scope) {
    pinned.push_back(scope);
    std::weak_ptr<Scope> weak = scope;
    const MacroDef* d = def.get();
    return Value::callable(def->name, [d, weak](Interp& in, Args& args) -> Value {
        ScopeP defscope = weak.lock();
        if (!defscope) fail("macro '" + d->name + "' outlived its scope");
        return in.call_macro(*d, defscope, args, nullptr);
    });
}

Flow Interp::exec(const Body& body, const ScopeP& scope, std::string& out) {
    for (const auto& s : body) {
        Flow f = exec_stmt(*s, scope, out);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

// The `loop` variable of a for loop's k-th iteration over items (jinja2's LoopContext); `changed_last` is shared
// by the iterations for loop.changed().
static Value loop_variable(const std::vector<Value>& items, std::int64_t k,
                           const std::shared_ptr<std::pair<bool, Value>>& changed_last) {
    const std::int64_t n = static_cast<std::int64_t>(items.size());
    Dict loop;
    auto& li = loop.items;
    li.reserve(13);
    li.emplace_back("index", Value::integer(k + 1));
    li.emplace_back("index0", Value::integer(k));
    li.emplace_back("revindex", Value::integer(n - k));
    li.emplace_back("revindex0", Value::integer(n - k - 1));
    li.emplace_back("first", Value::boolean(k == 0));
    li.emplace_back("last", Value::boolean(k == n - 1));
    li.emplace_back("length", Value::integer(n));
    li.emplace_back("depth", Value::integer(1));
    li.emplace_back("depth0", Value::integer(0));
    li.emplace_back("previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value::undefined("there is no previous item"));
    li.emplace_back("nextitem", k + 1 < n ? items[static_cast<std::size_t>(k + 1)] : Value::undefined("there is no next item"));
    li.emplace_back("cycle", Value::callable("loop.cycle", [k](Interp&, Args& a) -> Value {
        if (a.pos.empty()) fail("no items for cycling given");
        return a.pos[static_cast<std::size_t>(k) % a.pos.size()];
    }));
    li.emplace_back("changed", Value::callable("loop.changed", [changed_last](Interp&, Args& a) -> Value {
        Value cur = Value::make_list(a.pos, true);
        if (changed_last->first && equals(changed_last->second, cur)) return Value::boolean(false);
        changed_last->first = true;
        changed_last->second = cur;
        return Value::boolean(true);
    }));
    return Value::make_dict(std::move(loop));
}

Flow Interp::exec_for(const Stmt& s, const ScopeP& scope, std::string& out) {
    Value seq = eval(*s.expr, scope);
    // A list is immutable and shared: loop over its items in place rather than over a copy.
    std::vector<Value> copied;
    if (!seq.is_seq()) copied = iterate(seq);
    const std::vector<Value>* source = seq.is_seq() ? &seq.list->items : &copied;
    if (s.cond) {
        std::vector<Value> kept;
        for (const auto& item : *source) {
            ScopeP fs = child(scope);
            assign(*s.target, item, fs);
            if (truthy(eval(*s.cond, fs))) kept.push_back(item);
        }
        copied = std::move(kept);
        source = &copied;
    }
    const std::vector<Value>& items = *source;
    if (items.empty()) return exec(s.else_body, scope, out);
    const std::int64_t n = static_cast<std::int64_t>(items.size());
    auto changed_last = std::make_shared<std::pair<bool, Value>>(false, Value());
    for (std::int64_t k = 0; k < n; ++k) {
        step();
        ScopeP it = child(scope);
        assign(*s.target, items[static_cast<std::size_t>(k)], it);
        if (s.uses_loop) it->vars.emplace_back("loop", loop_variable(items, k, changed_last));
        Flow f = exec(s.body, it, out);
        if (f == Flow::Break) break;
    }
    return Flow::Normal;
}

void Interp::exec_call_block(const Stmt& s, const ScopeP& scope, std::string& out) {
    const Expr& call_expr = *s.expr;
    Value callee = eval(*call_expr.a[0], scope);
    Args args = eval_args(*this, call_expr, 1, scope);
    pinned.push_back(scope);
    std::weak_ptr<Scope> weak = scope;
    const MacroDef* d = s.macro.get();
    Value caller = Value::callable("caller", [d, weak](Interp& in, Args& a) -> Value {
        ScopeP cs = weak.lock();
        if (!cs) fail("'caller' outlived its scope");
        return in.call_macro(*d, cs, a, nullptr);
    });
    args.kw.emplace_back("caller", caller);
    emit(out, to_str(call(callee, args)));
}

Flow Interp::exec_stmt(const Stmt& s, const ScopeP& scope, std::string& out) {
    EvalFrame frame(*this);
    step();
    switch (s.k) {
        case SK::Output:
            emit(out, s.text);
            return Flow::Normal;
        case SK::Print:
            emit(out, to_str(eval(*s.expr, scope)));
            return Flow::Normal;
        case SK::If:
            for (std::size_t k = 0; k < s.conds.size(); ++k)
                if (truthy(eval(*s.conds[k], scope))) return exec(s.bodies[k], scope, out);
            return exec(s.else_body, scope, out);
        case SK::For: return exec_for(s, scope, out);
        case SK::Set:
            assign(*s.target, eval(*s.expr, scope), scope);
            return Flow::Normal;
        case SK::SetBlock: {
            Value v = Value::string(render_body(s.body, child(scope)));
            if (s.cond) v = eval_filter_chain(*s.cond, v, scope);
            assign(*s.target, v, scope);
            return Flow::Normal;
        }
        case SK::Macro:
            scope->set(s.macro->name, define_macro(s.macro, scope));
            return Flow::Normal;
        case SK::CallBlock:
            exec_call_block(s, scope, out);
            return Flow::Normal;
        case SK::FilterBlock: {
            Value v = Value::string(render_body(s.body, child(scope)));
            emit(out, to_str(eval_filter_chain(*s.cond, v, scope)));
            return Flow::Normal;
        }
        case SK::With: {
            ScopeP ws = child(scope);
            for (const auto& kv : s.assigns) ws->set(kv.first, eval(*kv.second, scope));
            return exec(s.body, ws, out);
        }
        case SK::Break: return Flow::Break;
        case SK::Continue: return Flow::Continue;
        case SK::Scope: return exec(s.body, scope, out);
    }
    return Flow::Normal;
}

// ---------------------------------------------------------------- entry point
static std::string one_line(std::string m) {
    std::string out;
    for (char c : m) {
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else out += c;
    }
    return out;
}

Result<std::string> render(std::string_view source, const nlohmann::ordered_json& context, const std::optional<std::tm>& now) {
    try {
        Budget budget;
        BudgetScope counting(budget);
        std::shared_ptr<const Program> prog = parse(source);
        if (!context.is_object()) return error("chat template: the context must be a JSON object");
        Interp in;
        in.now = now;
        in.stack_base = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        auto root = std::make_shared<Scope>();
        for (auto it = context.begin(); it != context.end(); ++it) root->set(it.key(), from_json(it.value()));
        std::string out;
        in.exec(prog->body, root, out);
        return out;
    } catch (const Error& e) {
        return error("chat template: " + one_line(e.message));
    } catch (const std::bad_alloc&) {
        return error("chat template: out of memory while rendering");
    } catch (const std::exception& e) {
        return error(std::string("chat template: internal error: ") + e.what());
    }
}

}  // namespace colibri::jinja
