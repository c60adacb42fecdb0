// `colibri check`: validates a .bin or .bin.zst (tools/check.h).
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "model_options.h"
#include "tools/check.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

// Exit 0 valid, 1 invalid (every problem on its own line, naming the damaged section or tensor), 2 when the
// path cannot be read at all. Problems and the summary go to stdout: they are the command's output.
int cmd_check(const std::string& path, bool as_json, bool quiet) {
    tools::CheckOptions options;
    const bool tty = isatty(STDERR_FILENO) && !quiet && !as_json;
    if (tty) {
        options.progress = [last = -1](uint64_t done, uint64_t total) mutable {
            const int percent = total ? int(100.0 * double(done) / double(total)) : 100;
            if (percent != last) std::fprintf(stderr, "\rchecking: %3d%% of %.1f MiB", percent, double(total) / double(1 << 20));
            last = percent;
            return true;
        };
    }
    const tools::CheckReport report = tools::check_model(path, options);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (as_json) std::printf("%s\n", tools::check_report_json(report).c_str());
    if (!report.fatal.empty()) {
        fail("check", report.fatal);
        return report.unreadable ? 2 : 1;
    }
    if (as_json) return report.valid ? 0 : 1;
    for (const std::string& p : report.problems) std::printf("%s\n", p.c_str());
    if (!quiet) {
        std::printf("%s: %s: %zu sections, %zu tensors, %llu bytes checked%s\n", path.c_str(),
                    report.valid ? "valid" : "INVALID", report.sections.size(), report.tensors.size(),
                    static_cast<unsigned long long>(report.bytes_checked), report.compressed ? " (decompressed from .bin.zst)" : "");
    }
    return report.valid ? 0 : 1;
}

class Check final : public Command {
public:
    explicit Check(CLI::App& app) {
        sub_ = app.add_subcommand("check", "validate a .bin or .bin.zst file: exit 0 valid, 1 invalid, 2 unreadable");
        sub_->add_option("model", path_, "model file")->required();
        sub_->add_flag("--json", as_json_, "JSON report (docs/FORMAT.md, \"Check report\")");
        sub_->add_flag("-q,--quiet", quiet_, "no progress line and no summary: only the problems");
    }
    int run() override { return cmd_check(path_, as_json_, quiet_); }

private:
    std::string path_;
    bool as_json_ = false, quiet_ = false;
};

}  // namespace

std::unique_ptr<Command> check_command(CLI::App& app) { return std::make_unique<Check>(app); }

}  // namespace colibri::cli
