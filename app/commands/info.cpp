// `colibri info`: a model's hyper-parameters and what its family does (tools/model_summary.h).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/core/model.h"
#include "model_options.h"
#include "tools/model_summary.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

int cmd_info(const std::string& path, bool as_json) {
    auto model = Model::load(path);
    if (!model) return fail("info", model.message());
    const json j = tools::model_info_json(*model.value());
    if (as_json) {
        std::printf("%s\n", j.dump(1).c_str());
        return 0;
    }
    for (auto it = j.begin(); it != j.end(); ++it) std::printf("%-20s %s\n", it.key().c_str(), it.value().dump().c_str());
    return 0;
}

class Info final : public Command {
public:
    explicit Info(CLI::App& app) {
        sub_ = app.add_subcommand("info", "print a model's hyper-parameters");
        sub_->add_option("model", path_, "model file")->required();
        sub_->add_flag("--json", as_json_, "JSON output");
    }
    int run() override { return cmd_info(path_, as_json_); }

private:
    std::string path_;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> info_command(CLI::App& app) { return std::make_unique<Info>(app); }

}  // namespace colibri::cli
