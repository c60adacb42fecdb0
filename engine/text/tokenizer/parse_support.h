// What every part of the tokenizer shares while it reads tokenizer.json: the two errors, the bounds on hostile
// input, and the small readers of a component's JSON fields.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace colibri::tokenizer_parts {

using json = nlohmann::json;

// Thrown only inside from_json and caught there: turns into a one-line Result error.
struct LoadError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& what);

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

bool get_bool(const json& j, const char* key, bool dflt);
std::string get_string(const json& j, const char* key, const std::string& dflt);
const json& get_array(const json& j, const char* key, const char* where);
// A component's "type", failing when it is not an object with one.
std::string type_of(const json& j, const char* what);
[[noreturn]] void too_deep(const char* what);
// An id in a JSON number: non-negative, and id + 1 fits an int32_t.
int32_t json_id(const json& v, const std::string& what);

}  // namespace colibri::tokenizer_parts
