// `colibri tune` and the kernel configuration every other command starts with (kernels/tuner.h).
#include "command.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "kernels/tuner.h"
#include "model_options.h"
#include "tools/bench.h"
#include "tools/tune_cache.h"

namespace colibri::cli {

bool configure_kernels_or_report() {
    std::string error, warning;
    if (!tools::configure_kernels(&error, &warning)) {
        std::fprintf(stderr, "colibri: %s\n", error.c_str());
        return false;
    }
    if (!warning.empty()) std::fprintf(stderr, "colibri: warning: %s\n", warning.c_str());
    return true;
}

namespace {

// Runs the tuner, prints a table (or the JSON report) on stdout and writes the cache. Exit status.
int cmd_tune(bool as_json, bool quick, const std::string& variant_list) {
    using namespace kernels;
    TuneOptions options;
    options.quick = quick;
    if (!variant_list.empty()) {
        auto variants = tools::parse_kernel_list(variant_list, "--variants");
        if (!variants) return fail("tune", variants.message());
        options.variants = std::move(variants.value());
    }
    const bool show_progress = isatty(STDERR_FILENO) != 0;
    const TuneReport report = run_tuner(options, [&](size_t done, size_t total, const TuneResult&) {
        if (show_progress) std::fprintf(stderr, "\rtune: %zu/%zu", done, total);
        return true;
    });
    if (show_progress) std::fprintf(stderr, "\n");

    const std::string path = tune_cache_path();
    const Status saved = tools::save_tune_cache(report, path);
    if (as_json) {
        std::printf("%s\n", tune_report_json(report).c_str());
    } else {
        std::printf("cpu: %s\nfeatures:", report.cpu_model.c_str());
        for (const std::string& f : report.cpu_features) std::printf(" %s", f.c_str());
        std::printf("\ntimer: %s, single thread, matmul with %zu vectors; * = chosen for (op, type)\n\n",
                    report.timer.c_str(), options.matmul_vectors);
        std::printf("%-6s %-5s %11s %-18s %13s %9s %8s\n", "op", "type", "rows x cols", "variant", "median ns",
                    "GFLOP/s", "GB/s");
        for (const TuneResult& r : report.results) {
            const std::string shape = std::to_string(r.rows) + "x" + std::to_string(r.cols);
            std::printf("%-6s %-5s %11s %-18s %13.0f %9.2f %8.2f%s\n", op_name(r.op), weight_type_label(r.type),
                        shape.c_str(), variant_display_name(r.variant), r.ns_median, r.gflops, r.gbps,
                        r.chosen ? " *" : "");
        }
        if (saved) std::printf("\nchoice saved to %s\n", path.c_str());
    }
    if (!saved) {
        std::fprintf(stderr, "colibri: %s\n", saved.message().c_str());
        return 1;
    }
    return 0;
}

class Tune final : public Command {
public:
    explicit Tune(CLI::App& app) {
        sub_ = app.add_subcommand("tune", "benchmark the kernel variants, pick the fastest per op and type, cache the choice");
        sub_->add_flag("--json", as_json_, "JSON output");
        sub_->add_flag("--quick", quick_, "one shape, three repetitions");
        sub_->add_option("--variants", variants_, "measure only these kernel variants (e.g. avx2,avx512); the others are never chosen");
    }
    int run() override { return cmd_tune(as_json_, quick_, variants_); }
    bool uses_configured_kernels() const override { return false; }

private:
    bool as_json_ = false, quick_ = false;
    std::string variants_;
};

}  // namespace

std::unique_ptr<Command> tune_command(CLI::App& app) { return std::make_unique<Tune>(app); }

}  // namespace colibri::cli
