// The auto-tuner: micro-benchmarks of every supported kernel variant per op (matvec, matmul), weight type and
// shape; picks the fastest variant per (op, type) and caches the choice in a JSON file keyed by the CPU model
// and the library version. All variants give bit-identical results (kernels/canonical.h), so a choice only
// changes speed. No Qt: the Studio runs it in a dialog through the progress callback.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "registry.h"
#include "types.h"

namespace colibri::kernels {

struct TuneShape {
    size_t rows, cols;
};

// The types the kernels multiply with, which the tuner measures: the weight-type table's matrix rows.
const std::vector<WeightType>& kernel_types();

struct TuneOptions {
    bool quick = false;             // one shape (1024x1024), 3 repetitions: seconds, for tests and a first look
    std::vector<TuneShape> shapes;  // empty: the bench model's (1024x1024, 2816x1024, 1024x2816, 32000x1024)
    size_t reps = 0;                // repetitions per measurement (the median is kept); 0: 3 quick, 7 otherwise
    size_t matmul_vectors = 16;     // n of the matmul measurements (a prompt chunk)
    std::vector<Variant> variants;  // empty: every supported variant
};

struct TuneResult {
    Op op;
    WeightType type;
    size_t rows, cols;
    Variant variant;
    double ns_median;
    double gflops;  // 2·rows·cols·n / time
    double gbps;    // (weight bytes + activation bytes) / time; weights are read once per call
    bool chosen;    // this variant is the one picked for (op, type)
};

struct TuneChoice {
    Variant variant[kOpCount][kWeightTypeCount];
};

struct TuneReport {
    std::string version;  // library version
    std::string cpu_model;
    std::vector<std::string> cpu_features;
    std::string timer;  // "rdtsc", "cntvct_el0" or "steady_clock"
    std::vector<TuneResult> results;
    TuneChoice choice;
    bool cancelled = false;  // the progress callback asked to stop: results are partial, choice is the default
};

// Called after each measurement with (done, total, the result); returning false cancels the run.
using TuneProgress = std::function<bool(size_t done, size_t total, const TuneResult& result)>;

TuneReport run_tuner(const TuneOptions& options, const TuneProgress& progress = {});

// {"colibri_version", "cpu": {"model", "features"}, "results": [{"op", "type", "rows", "cols", "variant",
// "ns_median", "gflops", "gbps", "chosen"}]}
std::string tune_report_json(const TuneReport& report);

std::string library_version();

// The cache file: COLIBRI_TUNE_CACHE, else $XDG_CACHE_HOME/colibri/tune.json, else ~/.cache/colibri/tune.json.
// Reading and writing it are tools/tune_cache.h's job (safe commits live in the engine, above the kernels);
// these work on its text, which must have passed json_too_deep (engine/base/json_depth.h): copying a parsed value
// recurses once per level.
std::string tune_cache_path();
// The cache's text with this report's (CPU model, version) entry added or replaced; the entries of other
// machines in `old_text` are kept (text that is not a tune cache is replaced).
std::string tune_cache_with(std::string_view old_text, const TuneReport& report);
// The choice stored in a cache's text for (cpu_model, version); false when the entry or a usable choice is
// missing (`error` set only when the text is not a tune cache). Never throws, whatever the text.
bool tune_choice_from_cache(std::string_view text, const std::string& cpu_model, const std::string& version,
                            TuneChoice* choice, std::string* error);
// Makes `choice` the active variant of every (op, type).
void apply_tune_choice(const TuneChoice& choice);

}  // namespace colibri::kernels
