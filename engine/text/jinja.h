// Internal to the engine: a Jinja2 renderer for the subset Hugging Face chat templates use, with
// the semantics of jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
// as transformers' apply_chat_template configures it. chat_template.h is the public face.
//
// Errors inside the renderer are thrown as jinja::Error and turned into a Status at the border
// (render()); nothing throws out of render().
#pragma once
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/base/status.h"
#include "engine/text/utf8.h"

namespace colibri::jinja {

// ---------------------------------------------------------------- limits
// A template comes with the model file, so it is hostile input: every parse and render is bounded in depth
// (the stack), work (time) and bytes (memory). docs/FORMAT.md, "Threat model", lists these values.
inline constexpr std::size_t kMaxOutputBytes = 64u << 20;      // rendered text and any string built
inline constexpr int kMaxValueDepth = 400;                     // nesting of lists/dicts
inline constexpr int kMaxParseDepth = 200;                     // nesting of blocks, and the height of an expression tree
inline constexpr int kMaxCallDepth = 100;                      // macro recursion
inline constexpr int kMaxEvalDepth = 1000;                     // statements and expressions being evaluated, nested
// ... and the stack those frames take, measured: a frame's size depends on the build (AddressSanitizer's are
// several times larger, so 1000 levels overflowed its 8 MiB stack), so the count alone is no bound.
inline constexpr std::size_t kMaxEvalStackBytes = 2u << 20;
inline constexpr std::uint64_t kMaxSteps = 10'000'000;         // evaluation steps (guards runaway loops)
inline constexpr std::uint64_t kMaxWorkBytes = 256ull << 20;   // bytes created, copied, compared or scanned
inline constexpr std::size_t kMaxListItems = 1'000'000;       // items in one list
inline constexpr std::int64_t kMaxRange = 100000;              // jinja2 sandbox MAX_RANGE

struct Error {
    std::string message;
};
[[noreturn]] void fail(std::string message);

// ---------------------------------------------------------------- work budget
// The budget of the render running on this thread (render() installs it; outside a render nothing is
// counted). Value helpers charge it directly, so the cost of a string compared or copied deep inside a
// builtin is counted without passing the interpreter through every helper.
struct Budget {
    std::uint64_t steps = 0;  // statements, loop iterations, items visited
    std::uint64_t bytes = 0;  // bytes created, copied, compared or scanned
};
class BudgetScope {
public:
    explicit BudgetScope(Budget& b);
    ~BudgetScope();
    BudgetScope(const BudgetScope&) = delete;
    BudgetScope& operator=(const BudgetScope&) = delete;
private:
    Budget* saved_;
};
void charge_steps(std::uint64_t n);
void charge_bytes(std::uint64_t n);

// Immutable text shared by every copy of a Value: copying a Value never copies its string, so what a render
// holds is bounded by the bytes it creates, each charged to the budget, not multiplied by its copies.
class Text {
public:
    Text() = default;
    Text(std::string s) : p_(s.empty() ? nullptr : std::make_shared<const std::string>(std::move(s))) {}
    Text(const char* s) : Text(std::string(s)) {}
    const std::string& str() const { return p_ ? *p_ : empty_string(); }
    operator const std::string&() const { return str(); }
    operator std::string_view() const { return str(); }
    std::size_t size() const { return p_ ? p_->size() : 0; }
    bool empty() const { return size() == 0; }
    friend bool operator==(const Text& a, const Text& b) { return a.p_ == b.p_ || a.str() == b.str(); }
    friend bool operator==(const Text& a, std::string_view b) { return std::string_view(a.str()) == b; }
private:
    static const std::string& empty_string() { static const std::string e; return e; }
    std::shared_ptr<const std::string> p_;
};

// ---------------------------------------------------------------- values
// BigInt: a Python int beyond 64 bits, as context JSON can carry one (a tool-call argument); it prints, serialises
// and compares exactly, and arithmetic on it is refused rather than rounded.
enum class Kind : std::uint8_t { Undefined, None, Bool, Int, BigInt, Float, String, List, Tuple, Dict, Namespace, Callable };

struct Value;
struct ListObj;
struct Dict;
struct Namespace;
struct Callable;
class Interp;

struct Value {
    Kind kind = Kind::Undefined;
    // A List produced by one of jinja2's lazy filters (select, map, reverse, items, ...): it
    // iterates, but like a Python generator it has no length or index and is always truthy.
    bool gen = false;
    bool b = false;
    std::int64_t i = 0;
    double f = 0;
    Text s;  // String text; BigInt's decimal digits (with '-'); for Undefined, the hint used in error messages
    std::shared_ptr<const ListObj> list;
    std::shared_ptr<const Dict> dict;
    std::shared_ptr<Namespace> ns;
    std::shared_ptr<const Callable> fn;

    static Value undefined(std::string hint = {});
    static Value none();
    static Value boolean(bool v);
    static Value integer(std::int64_t v);
    static Value real(double v);
    static Value big_integer(std::string digits);  // an integer from its canonical decimal text: Int where it fits
    static Value string(std::string v);  // new text: its bytes are charged to the budget
    static Value of_text(Text t);         // text that already exists, shared
    static Value make_list(std::vector<Value> items, bool tuple = false);
    static Value make_dict(Dict d);
    static Value callable(std::string name, std::function<Value(Interp&, struct Args&)> fn);

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_none() const { return kind == Kind::None; }
    bool is_string() const { return kind == Kind::String; }
    bool is_seq() const { return kind == Kind::List || kind == Kind::Tuple; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::BigInt || kind == Kind::Float || kind == Kind::Bool; }
    int depth() const;
};

struct ListObj {
    std::vector<Value> items;
    int depth = 1;
};

// Insertion-ordered string-keyed mapping (Python dict order).
struct Dict {
    std::vector<std::pair<std::string, Value>> items;
    int depth = 1;
    const Value* find(std::string_view key) const;
    void set(std::string key, Value v);
};

struct Namespace {
    Dict attrs;
};

// Call arguments: positional then keyword.
struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};

struct Callable {
    std::string name;
    std::function<Value(Interp&, Args&)> fn;
};

// ---------------------------------------------------------------- value helpers (jinja_value.cpp)
std::string kind_name(const Value& v);                // Python type name, for messages
bool truthy(const Value& v);
std::string to_str(const Value& v);                   // Python str()
std::string to_repr(const Value& v);                  // Python repr()
std::string py_float_repr(double d);
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b, std::string_view op);  // <0, 0, >0; fails on bad types
Value from_json(const nlohmann::ordered_json& j, int depth = 0);
// Parses context JSON as Python's json module reads it: an integer literal beyond 64 bits stays an exact integer
// (held as a binary value tagged kBigIntSubtype, which from_json turns into a BigInt) instead of becoming a double.
// A discarded value on a syntax error.
inline constexpr std::uint64_t kBigIntSubtype = 0xB16;
nlohmann::ordered_json parse_context_json(std::string_view text);
struct JsonOptions {
    bool ensure_ascii = false;
    bool has_indent = false;
    std::string indent;
    std::string item_sep = ", ";
    std::string key_sep = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& opt);
void check_size(std::size_t n);
[[noreturn]] void fail_undefined(const Value& v);

// Python str helpers over engine/text/utf8.h, charged to the budget. A byte that cannot start a character reads
// as U+FFFD (values are checked as valid UTF-8 where they enter).
std::vector<char32_t> decode_utf8(std::string_view s);
std::string encode_utf8(const std::vector<char32_t>& cps);
std::size_t utf8_length(std::string_view s);  // in code points
bool py_isspace(char32_t c);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_strip(std::string_view s, const Value* chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const Value* sep, std::int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const Value* sep, std::int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view rep, std::int64_t count);
// Substring search in linear time (glibc's two-way memmem), charged to the budget; npos when absent.
std::size_t find_text(std::string_view hay, std::string_view needle, std::size_t from = 0);
std::size_t rfind_text(std::string_view hay, std::string_view needle);  // the last occurrence

// ---------------------------------------------------------------- AST
struct Expr;
struct Stmt;
using ExprP = std::unique_ptr<Expr>;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

enum class EK : std::uint8_t {
    Literal, Name, List, Tuple, DictLit, Getattr, Getitem, Slice, Call, Filter, Test,
    Not, Neg, Pos, Binary, And, Or, Compare, Concat, CondExpr
};

struct Expr {
    EK k;
    int line = 0;
    int height = 1;            // longest path to a leaf, bounded by the parser: evaluation and destruction recurse this deep
    Value lit;                 // Literal
    std::string name;          // Name, attribute, filter/test name, binary operator
    std::vector<ExprP> a;      // operands / positional args (Call: a[0] is the callee; Slice: obj,start,stop,step)
    std::vector<std::pair<std::string, ExprP>> kw;  // keyword args
    std::vector<std::string> ops;                    // Compare: operators between a[i] and a[i+1]
    bool negated = false;      // Test: `is not`
};

enum class SK : std::uint8_t {
    Output, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue, Scope
};

struct MacroDef {
    std::string name;
    std::vector<std::pair<std::string, ExprP>> params;  // default may be null
    Body body;
    bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Stmt {
    SK k;
    int line = 0;
    std::string text;                  // Output
    ExprP expr;                        // Print / Set value / For iterable / CallBlock call
    ExprP target;                      // Set / For / SetBlock target (Name, Tuple of Names, Getattr)
    ExprP cond;                        // For: filter condition; SetBlock/FilterBlock: filter chain (Filter with null operand at the root)
    std::vector<ExprP> conds;          // If: conditions of if/elif
    std::vector<Body> bodies;          // If: branch bodies
    Body body, else_body;
    std::shared_ptr<MacroDef> macro;   // Macro / CallBlock (the caller)
    std::vector<std::pair<std::string, ExprP>> assigns;  // With
    bool uses_loop = false;            // For: the body mentions `loop`
};

struct Program {
    Body body;
};

// Parse a template (jinja_parse.cpp). Throws Error.
std::shared_ptr<const Program> parse(std::string_view source);

// Render (jinja_eval.cpp); never throws. `now` fixes strftime_now's clock (local time when unset).
Result<std::string> render(std::string_view source, const nlohmann::ordered_json& context,
                           const std::optional<std::tm>& now = std::nullopt);

// ---------------------------------------------------------------- interpreter (jinja_eval.cpp)
struct Scope {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Scope> parent;
    const Value* find(std::string_view name) const;
    void set(const std::string& name, Value v);
};
using ScopeP = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

class Interp {
public:
    int call_depth = 0;
    int eval_depth = 0;          // nested eval/exec frames: bounds the stack whatever macros recurse into
    std::uintptr_t stack_base = 0;  // the render's frame address: EvalFrame measures the stack used below it
    std::vector<ScopeP> pinned;  // scopes captured (weakly) by macros: kept alive for the render
    std::optional<std::tm> now;  // strftime_now's clock when fixed by the caller
    void step(std::uint64_t n = 1) { charge_steps(n); }
    Value eval(const Expr& e, const ScopeP& scope);
    Value eval_filter_chain(const Expr& e, const Value& root, const ScopeP& scope);
    Value call(const Value& callee, Args& args);
    Value getattr(const Value& obj, const std::string& name);
    Value getitem(const Value& obj, const Value& key);
    std::vector<Value> iterate(const Value& v);  // Python iteration
    bool contains(const Value& container, const Value& item);
    Value arith(const std::string& op, const Value& a, const Value& b);

    Flow exec(const Body& body, const ScopeP& scope, std::string& out);
    std::string render_body(const Body& body, const ScopeP& scope);

private:
    Flow exec_stmt(const Stmt& s, const ScopeP& scope, std::string& out);
    Flow exec_for(const Stmt& s, const ScopeP& scope, std::string& out);
    void exec_call_block(const Stmt& s, const ScopeP& scope, std::string& out);
    void assign(const Expr& target, const Value& v, const ScopeP& scope);
    Value define_macro(const std::shared_ptr<MacroDef>& def, const ScopeP& scope);
    Value call_macro(const MacroDef& def, const ScopeP& defscope, Args& args, const Value* caller);
    Value slice(const Value& obj, const Expr& sl, const ScopeP& scope);
    Value lookup(const std::string& name, const ScopeP& scope);
};

// Builtins (jinja_builtins.cpp)
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value call_filter(Interp& in, const std::string& name, const Value& v, Args& args);
bool call_test(Interp& in, const std::string& name, const Value& v, Args& args);
Value bound_method(const Value& obj, const std::string& name);  // Undefined if obj has no such method
Value make_global(const std::string& name);                      // Undefined if not a global
std::string html_escape(std::string_view s);

}  // namespace colibri::jinja
