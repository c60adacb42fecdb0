// `colibri eval`: greedy replies to held-out dialogues scored per skill (tools/chat_eval.h).
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "command.h"
#include "engine/core/model.h"
#include "model_options.h"
#include "tools/chat_eval.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

// Held-out dialogues through the chat template, greedy; --require SKILL=FRACTION makes it a pass/fail check.
int cmd_eval(const tools::ModelArgs& args, const std::string& dialogues, int max_tokens, const std::vector<std::string>& require,
             bool as_json) {
    std::vector<tools::SkillRequirement> needs;
    for (const std::string& r : require) {
        auto need = tools::parse_skill_requirement(r);
        if (!need) return fail("eval", need.message());
        needs.push_back(std::move(need.value()));
    }
    auto cases = tools::read_eval_cases(dialogues);
    if (!cases) return fail("eval", cases.message());
    auto loaded = load(args);
    if (!loaded) return fail("eval", loaded.message());
    OpenedModel& l = loaded.value();
    const bool tty = isatty(STDERR_FILENO);
    auto report = tools::run_chat_eval(*l.model, *l.session, std::move(cases.value()), max_tokens, [tty](size_t done, size_t total) {
        if (tty) std::fprintf(stderr, "\r%zu / %zu", done, total);
        return true;
    });
    if (tty) std::fprintf(stderr, "\r");
    if (!report) return fail("eval", report.message());
    if (as_json)
        std::printf("%s\n", tools::eval_json(report.value()).dump(1).c_str());
    else
        std::fputs(tools::eval_text(report.value()).c_str(), stdout);
    int status = 0;
    for (const std::string& unmet : tools::unmet_requirements(report.value(), needs, dialogues)) status = fail("eval", unmet);
    return status;
}

class Eval final : public Command {
public:
    explicit Eval(CLI::App& app) {
        sub_ = app.add_subcommand("eval", "score greedy replies to held-out dialogues (JSON lines: skill, prompt, expect_regex)");
        add_model_args(sub_, args_, false);
        sub_->add_option("--dialogues", dialogues_, "JSON-lines file of cases")->required();
        sub_->add_option("-n,--max-tokens", max_tokens_, "longest reply in tokens (default 96)");
        sub_->add_option("--require", require_, "SKILL=FRACTION: exit 1 when a skill's accuracy is lower ('all' for every case)");
        sub_->add_flag("--json", as_json_, "JSON output with every reply");
    }
    int run() override { return cmd_eval(args_, dialogues_, max_tokens_, require_, as_json_); }

private:
    tools::ModelArgs args_;
    std::string dialogues_;
    int max_tokens_ = 96;
    std::vector<std::string> require_;
    bool as_json_ = false;
};

}  // namespace

std::unique_ptr<Command> eval_command(CLI::App& app) { return std::make_unique<Eval>(app); }

}  // namespace colibri::cli
