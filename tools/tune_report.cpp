#include "tools/tune_report.h"

#include <nlohmann/json.hpp>
#include <string>

#include "engine/base/json_depth.h"

namespace colibri::tools {

namespace {

using nlohmann::json;

// The member `key` of `o`, of the JSON type `is` accepts; an error naming it otherwise.
Result<const json*> member(const json& o, const char* key, bool (json::*is)() const noexcept, const std::string& where) {
    const auto it = o.find(key);
    if (it == o.end()) return error(where + "\"" + key + "\" is missing");
    if (!((*it).*is)()) return error(where + "\"" + key + "\" is of the wrong type");
    return &*it;
}

bool weight_type_from_label(const std::string& label, WeightType* out) {
    for (WeightType t : kernels::kernel_types())
        if (label == kernels::weight_type_label(t)) return *out = t, true;
    return false;
}

}  // namespace

Result<kernels::TuneReport> parse_tune_report(std::string_view text) {
    if (json_too_deep(text)) return error("not a tune report: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    json doc;
    try {
        doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return error("not JSON (at byte " + std::to_string(e.byte) + ")");
    }
    if (!doc.is_object()) return error("a tune report is a JSON object");
    auto cpu = member(doc, "cpu", &json::is_object, "");
    if (!cpu) return cpu.status();
    auto results = member(doc, "results", &json::is_array, "");
    if (!results) return results.status();
    kernels::TuneReport report;
    if (auto v = doc.find("colibri_version"); v != doc.end() && v->is_string()) report.version = v->get<std::string>();
    const json& c = *cpu.value();
    if (auto m = c.find("model"); m != c.end() && m->is_string()) report.cpu_model = m->get<std::string>();
    if (auto f = c.find("features"); f != c.end() && f->is_array())
        for (const json& name : *f)
            if (name.is_string()) report.cpu_features.push_back(name.get<std::string>());
    size_t i = 0;
    for (const json& r : *results.value()) {
        const std::string where = "result " + std::to_string(i++) + ": ";
        if (!r.is_object()) return error(where + "not an object");
        kernels::TuneResult t{};
        std::string names[3];
        const char* keys[3] = {"op", "type", "variant"};
        for (int k = 0; k < 3; ++k) {
            auto v = member(r, keys[k], &json::is_string, where);
            if (!v) return v.status();
            names[k] = v.value()->get<std::string>();
        }
        if (!kernels::op_from_name(names[0], &t.op)) return error(where + "unknown op '" + names[0] + "'");
        if (!weight_type_from_label(names[1], &t.type)) return error(where + "unknown weight type '" + names[1] + "'");
        if (!kernels::variant_from_name(names[2], &t.variant)) return error(where + "unknown kernel variant '" + names[2] + "'");
        double numbers[3];
        const char* number_keys[3] = {"rows", "cols", "ns_median"};
        for (int k = 0; k < 3; ++k) {
            auto v = member(r, number_keys[k], &json::is_number, where);
            if (!v) return v.status();
            numbers[k] = v.value()->get<double>();
        }
        // Shapes are whole and positive (a matrix of 2^40 rows is no kernel's), the time positive.
        if (!(numbers[0] >= 1 && numbers[0] <= 1 << 30 && numbers[1] >= 1 && numbers[1] <= 1 << 30 && numbers[0] == size_t(numbers[0]) &&
              numbers[1] == size_t(numbers[1]) && numbers[2] > 0))
            return error(where + "rows, cols and ns_median must be positive (rows and cols whole)");
        t.rows = size_t(numbers[0]);
        t.cols = size_t(numbers[1]);
        t.ns_median = numbers[2];
        for (auto [key, out] : {std::pair{"gflops", &t.gflops}, std::pair{"gbps", &t.gbps}}) {
            const auto v = r.find(key);
            if (v == r.end()) continue;  // derived figures: a report may leave them out
            if (!v->is_number()) return error(where + "\"" + key + "\" is of the wrong type");
            *out = v->get<double>();
        }
        if (const auto v = r.find("chosen"); v != r.end()) {
            if (!v->is_boolean()) return error(where + "\"chosen\" is of the wrong type");
            t.chosen = v->get<bool>();
        }
        report.results.push_back(t);
    }
    if (report.results.empty()) return error("the report has no results");
    return report;
}

}  // namespace colibri::tools
