#include "kernels/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kernels/cpu_info.h"
#include "kernels/matvec.h"
#include "kernels/random_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#ifndef COLIBRI_VERSION_STRING
#define COLIBRI_VERSION_STRING "unknown"
#endif

namespace colibri::kernels {

const std::vector<WeightType>& kernel_types() {
    static const std::vector<WeightType> types = [] {
        std::vector<WeightType> v;
        for (const WeightTypeInfo& w : weight_types())
            if (w.matrix) v.push_back(w.type);
        return v;
    }();
    return types;
}

namespace {

using json = nlohmann::json;


// A cycle-rate counter where the CPU has one readable from user space, calibrated against steady_clock.
struct Timer {
    const char* name;
    double ns_per_tick;

    static uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
        return __rdtsc();
#elif defined(__aarch64__)
        uint64_t v;
        asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
        return v;
#else
        return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
    }

    static Timer calibrate() {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#if defined(__aarch64__)
        const char* name = "cntvct_el0";
#else
        const char* name = "rdtsc";
#endif
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const uint64_t c0 = ticks();
        while (clock::now() - t0 < std::chrono::milliseconds(20)) {
        }
        const uint64_t c1 = ticks();
        const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
        if (c1 > c0) return {name, ns / double(c1 - c0)};
#endif
        return {"steady_clock", std::chrono::duration<double, std::nano>(std::chrono::steady_clock::duration(1)).count()};
    }
};

// Weights with realistic magnitudes from the one random filler (kernels/random_blocks.h): no NaN, and subnormals
// as rare as in real weights, so that neither slows a variant down artificially.
std::vector<uint8_t> make_matrix(WeightType type, size_t rows, size_t cols, uint64_t seed) {
    std::vector<uint8_t> m(row_bytes(type, cols) * rows);
    random_matrix(type, rows, cols, 0.5f, seed, m.data());
    return m;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Median time of `reps` calls after one warm-up call; calls slower than a quarter second are repeated
// only three times (the scalar reference on the large shapes).
template <typename Call>
double measure_ns(const Timer& timer, size_t reps, const Call& call) {
    uint64_t t0 = Timer::ticks();
    call();
    const double warm_ns = double(Timer::ticks() - t0) * timer.ns_per_tick;
    if (warm_ns > 2.5e8) reps = std::min<size_t>(reps, 3);
    std::vector<double> samples;
    samples.reserve(reps);
    for (size_t r = 0; r < reps; ++r) {
        t0 = Timer::ticks();
        call();
        samples.push_back(double(Timer::ticks() - t0) * timer.ns_per_tick);
    }
    return median(std::move(samples));
}

TuneChoice default_choice() {
    TuneChoice c;
    for (auto& op : c.variant) std::fill(std::begin(op), std::end(op), best_variant());
    return c;
}

json choice_to_json(const TuneChoice& c) {
    json j = json::object();
    for (size_t op = 0; op < kOpCount; ++op) {
        json& per_type = j[op_name(Op(op))];
        for (WeightType t : kernel_types()) per_type[weight_type_label(t)] = variant_name(c.variant[op][size_t(t)]);
    }
    return j;
}

}  // namespace

std::string library_version() { return COLIBRI_VERSION_STRING; }

TuneReport run_tuner(const TuneOptions& options, const TuneProgress& progress) {
    TuneReport report;
    report.version = library_version();
    report.cpu_model = cpu_model();
    report.cpu_features = cpu_feature_names();
    report.choice = default_choice();
    const Timer timer = Timer::calibrate();
    report.timer = timer.name;

    std::vector<TuneShape> shapes = options.shapes;
    if (shapes.empty()) {
        shapes = options.quick ? std::vector<TuneShape>{{1024, 1024}}
                               : std::vector<TuneShape>{{1024, 1024}, {2816, 1024}, {1024, 2816}, {32000, 1024}};
    }
    std::vector<Variant> variants;
    for (Variant v : options.variants.empty() ? supported_variants() : options.variants) {
        if (variant_supported(v)) variants.push_back(v);
    }
    const size_t reps = options.reps ? options.reps : (options.quick ? 3 : 7);
    const size_t n = std::max<size_t>(1, options.matmul_vectors);
    const size_t total = kernel_types().size() * shapes.size() * variants.size() * kOpCount;

    uint64_t seed = 0;
    for (WeightType type : kernel_types()) {
        for (const TuneShape& s : shapes) {
            const std::vector<uint8_t> w = make_matrix(type, s.rows, s.cols, ++seed);
            std::vector<float> x(s.cols * n), y(s.rows * n);
            RandomStream rx(seed, uint64_t(1) << 40);  // a stream no matrix row uses
            for (float& v : x) v = rx.uniform() * 2.0f - 1.0f;
            for (Variant v : variants) {
                const KernelSet* k = kernel_set(v);
                for (size_t op = 0; op < kOpCount; ++op) {
                    const size_t vectors = Op(op) == Op::Matvec ? 1 : n;
                    const double ns = measure_ns(timer, reps, [&] {
                        if (Op(op) == Op::Matvec) k->matvec[size_t(type)](w.data(), s.cols, x.data(), y.data(), 0, s.rows);
                        else k->matmul[size_t(type)](w.data(), s.cols, x.data(), n, y.data(), s.rows, 0, s.rows);
                    });
                    const double flops = 2.0 * double(s.rows) * double(s.cols) * double(vectors);
                    const double bytes = double(w.size()) + 4.0 * double(vectors) * double(s.cols + s.rows);
                    report.results.push_back({Op(op), type, s.rows, s.cols, v, ns, flops / ns, bytes / ns, false});
                    if (progress && !progress(report.results.size(), total, report.results.back())) {
                        report.cancelled = true;
                        return report;
                    }
                }
            }
        }
    }

    // Per (op, type): the variant with the smallest geometric mean time over the shapes.
    for (size_t op = 0; op < kOpCount; ++op) {
        for (WeightType type : kernel_types()) {
            double best_score = INFINITY;
            for (Variant v : variants) {
                double score = 0;
                for (const TuneResult& r : report.results) {
                    if (r.op == Op(op) && r.type == type && r.variant == v) score += std::log(r.ns_median);
                }
                if (score < best_score) best_score = score, report.choice.variant[op][size_t(type)] = v;
            }
        }
    }
    for (TuneResult& r : report.results) r.chosen = report.choice.variant[size_t(r.op)][size_t(r.type)] == r.variant;
    return report;
}

std::string tune_report_json(const TuneReport& report) {
    json results = json::array();
    for (const TuneResult& r : report.results) {
        results.push_back({{"op", op_name(r.op)},
                           {"type", weight_type_label(r.type)},
                           {"rows", r.rows},
                           {"cols", r.cols},
                           {"variant", variant_name(r.variant)},
                           {"ns_median", r.ns_median},
                           {"gflops", r.gflops},
                           {"gbps", r.gbps},
                           {"chosen", r.chosen}});
    }
    const json j = {{"colibri_version", report.version},
                    {"cpu", {{"model", report.cpu_model}, {"features", report.cpu_features}}},
                    {"results", results}};
    return j.dump(2);
}

std::string tune_cache_path() {
    if (const char* p = std::getenv("COLIBRI_TUNE_CACHE"); p && *p) return p;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/colibri/tune.json";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/colibri/tune.json";
    return "";
}

namespace {

// A string member of an object, or "" (a member of another type must not throw: the text may be anything).
std::string string_member(const json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_tune_cache(const json& doc) {
    return doc.is_object() && doc.contains("entries") && doc["entries"].is_array();
}

}  // namespace

std::string tune_cache_with(std::string_view old_text, const TuneReport& report) {
    json doc = {{"format", 1}, {"entries", json::array()}};
    const json old = json::parse(old_text.begin(), old_text.end(), nullptr, false);
    if (is_tune_cache(old)) {
        for (const json& e : old["entries"]) {
            if (e.is_object() && !(string_member(e, "cpu") == report.cpu_model && string_member(e, "version") == report.version))
                doc["entries"].push_back(e);
        }
    }
    doc["entries"].push_back({{"cpu", report.cpu_model}, {"version", report.version}, {"choice", choice_to_json(report.choice)}});
    return doc.dump(2) + "\n";
}

bool tune_choice_from_cache(std::string_view text, const std::string& model, const std::string& version, TuneChoice* choice,
                            std::string* error) {
    const json doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (!is_tune_cache(doc)) {
        *error = "not a colibri tune cache (rerun `colibri tune`)";
        return false;
    }
    for (const json& e : doc["entries"]) {
        if (!e.is_object() || string_member(e, "cpu") != model || string_member(e, "version") != version) continue;
        const auto stored = e.find("choice");
        if (stored == e.end() || !stored->is_object()) return false;
        TuneChoice c = default_choice();
        for (size_t op = 0; op < kOpCount; ++op) {
            const auto per_type = stored->find(op_name(Op(op)));
            if (per_type == stored->end() || !per_type->is_object()) return false;
            for (WeightType t : kernel_types()) {
                Variant v;
                const auto it = per_type->find(weight_type_label(t));
                // A variant this build or CPU cannot run makes the entry stale: the CPUID default stays.
                if (it == per_type->end() || !it->is_string() || !variant_from_name(it->get<std::string>(), &v) ||
                    !variant_supported(v)) {
                    return false;
                }
                c.variant[op][size_t(t)] = v;
            }
        }
        *choice = c;
        return true;
    }
    return false;
}

void apply_tune_choice(const TuneChoice& choice) {
    for (size_t op = 0; op < kOpCount; ++op) {
        for (WeightType t : kernel_types()) select_variant(Op(op), t, choice.variant[op][size_t(t)]);
    }
}

}  // namespace colibri::kernels
