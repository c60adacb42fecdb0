#include "engine/core/generation_defaults.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/base/json_depth.h"

namespace colibri {

namespace {

using nlohmann::json;

std::string show(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// A number field within [lo, hi] (hi inclusive unless open_hi); null and absent leave it unset.
Status read_number(const json& o, const char* key, double lo, double hi, bool lo_open, std::optional<float>* out) {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return error(std::string(key) + " is not a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi)
        return error(std::string(key) + " " + show(v) + " is not in " + (lo_open ? "(" : "[") + show(lo) + ", " + show(hi) + "]");
    *out = static_cast<float>(v);
    return Status::ok();
}

}  // namespace

Result<GenerationDefaults> parse_generation_defaults(std::string_view text) {
    GenerationDefaults d;
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return d;
    if (const std::string p = json_text_problem(text); !p.empty()) return error(p);
    const json o = json::parse(text, nullptr, false);
    if (o.is_discarded()) return error("not valid JSON");
    if (!o.is_object()) return error("the top level is not a JSON object");
    if (auto it = o.find("do_sample"); it != o.end() && !it->is_null()) {
        if (!it->is_boolean()) return error("do_sample is not true or false");
        d.do_sample = it->get<bool>();
    }
    COLIBRI_TRY(read_number(o, "temperature", 0.0, 100.0, false, &d.temperature));
    COLIBRI_TRY(read_number(o, "top_p", 0.0, 1.0, false, &d.top_p));
    COLIBRI_TRY(read_number(o, "min_p", 0.0, 1.0, false, &d.min_p));
    COLIBRI_TRY(read_number(o, "repetition_penalty", 0.0, 100.0, true, &d.repetition_penalty));
    if (auto it = o.find("top_k"); it != o.end() && !it->is_null()) {
        if (!it->is_number_integer()) return error("top_k is not a whole number");
        const bool negative = it->is_number_unsigned() ? false : it->get<int64_t>() < 0;
        if (negative || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT32_MAX)) ||
            (!it->is_number_unsigned() && it->get<int64_t>() > INT32_MAX))
            return error("top_k " + it->dump() + " is not in [0, 2147483647]");
        d.top_k = it->get<int32_t>();
    }
    return d;
}

SamplerConfig apply_generation_defaults(SamplerConfig base, const GenerationDefaults& d) {
    if (d.greedy()) {
        base.greedy = true;
        return base;
    }
    if (d.temperature) base.temperature = *d.temperature;
    if (d.top_k) base.top_k = *d.top_k;
    if (d.top_p) base.top_p = *d.top_p;
    if (d.min_p) base.min_p = *d.min_p;
    if (d.repetition_penalty) base.repetition_penalty = *d.repetition_penalty;
    return base;
}

std::string describe_generation_defaults(const GenerationDefaults& d) {
    if (d.greedy()) return "greedy";
    std::string out;
    auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
    if (d.temperature) add("temperature " + show(*d.temperature));
    if (d.top_k) add("top-k " + std::to_string(*d.top_k));
    if (d.top_p) add("top-p " + show(*d.top_p));
    if (d.min_p) add("min-p " + show(*d.min_p));
    if (d.repetition_penalty) add("repetition penalty " + show(*d.repetition_penalty));
    return out;
}

}  // namespace colibri
