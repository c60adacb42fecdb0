#include "engine/text/tokenizer/parse_support.h"

namespace colibri::tokenizer_parts {

void fail(const std::string& what) { throw LoadError(what); }

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

int32_t json_id(const json& v, const std::string& what) {
    if (!v.is_number_integer()) fail(what + " must be an integer id");
    const auto id = v.get<int64_t>();
    if (id < 0 || id >= 0x7FFFFFFF) fail(what + " has an out-of-range id " + std::to_string(id));  // id + 1 fits int32
    return static_cast<int32_t>(id);
}

}  // namespace colibri::tokenizer_parts
