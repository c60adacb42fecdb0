// `colibri chat`: the interactive chat on a model (the demo model when -m is not given); the loop is
// app/chat_command.cpp.
#include <nlohmann/json.hpp>

#include "../chat_command.h"
#include "../line_editor.h"
#include "command.h"
#include "engine/core/model.h"
#include "model_options.h"

namespace colibri::cli {

namespace {

using nlohmann::json;

int cmd_chat(const CLI::App& cmd, const tools::ModelArgs& args, const SamplerConfig& sc, cli::ChatOptions options) {
    if (const std::string p = sampler_config_problem(sc); !p.empty()) return fail("chat", p);
    auto mode = parse_speculate_mode(options.speculate);
    if (!mode) return fail("chat", mode.message());
    tools::ModelArgs with_head = args;
    with_head.mtp = mode.value() == SpeculateMode::Mtp;  // the session runs the head beside the model
    auto loaded = load(with_head);
    if (!loaded) return fail("chat", loaded.message());
    OpenedModel& l = loaded.value();
    // Under mpirun (expert parallelism) rank 0 chats and the other ranks follow its session.
    Communicator* ranks = l.comm && l.comm->size() > 1 ? l.comm.get() : nullptr;
    const bool follower = ranks && ranks->rank() != 0;
    if (l.model->tokenizer() == nullptr)  // every rank meets it: rank 0 says so
        return follower ? 1 : fail("chat", args.path + ": model has no tokenizer (convert a directory with tokenizer.json)");
    if (follower) return cli::follow_chat(*ranks, *l.session);
    options.model_path = args.path;
    options.history_path = cli::default_history_path();
    return cli::run_chat(*l.model, *l.session, sampler_for_model(cmd, sc, *l.model), options, ranks);
}

class Chat final : public Command {
public:
    explicit Chat(CLI::App& app) {
        sub_ = app.add_subcommand("chat", "interactive chat (the demo model when -m is not given)");
        add_model_args(sub_, args_, false);
        add_rank_args(sub_, args_);
        sub_->add_option("--system", options_.system_prompt, "system prompt");
        sub_->add_option("-n,--max-tokens", options_.max_tokens, "longest reply in tokens");
        sub_->add_flag("--no-prefix-cache", no_prefix_cache_, "re-evaluate the whole conversation each turn (for checking)");
        sub_->add_flag("--ignore-eos", options_.ignore_eos, "keep writing past end-of-turn tokens, up to --max-tokens (for measuring)");
        add_sampler_args(sub_, sampler_);
        speculate_option_ = add_speculate_arg(sub_, options_.speculate);
        sub_->footer(sub_->get_footer() + "\n\nUnder mpirun -np N (expert parallelism, docs/DISTRIBUTED.md): rank 0 reads stdin and chats, the other "
                     "ranks, each holding its share of the experts, follow its session; replies are one process's. A rank "
                     "that stops answering for --rank-timeout seconds ends the chat (exit 1, one line); SIGTERM to rank 0 "
                     "ends it on every rank.");
    }
    int run() override {
        options_.reuse_prefix = !no_prefix_cache_;
        options_.report_speculation = speculate_option_->count() > 0;
        return cmd_chat(*sub_, args_, sampler_, options_);
    }

private:
    tools::ModelArgs args_;
    SamplerConfig sampler_;
    ChatOptions options_;
    bool no_prefix_cache_ = false;
    CLI::Option* speculate_option_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> chat_command(CLI::App& app) { return std::make_unique<Chat>(app); }

}  // namespace colibri::cli
