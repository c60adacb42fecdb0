// The CLI's subcommands, one file each under app/commands/: a Command registers its options on the app and runs
// when the command line chose it. The work happens in the libraries (tools/, server/, engine/).
#pragma once
#include <CLI/CLI.hpp>
#include <memory>

namespace colibri::cli {

class Command {
public:
    virtual ~Command() = default;
    bool chosen() const { return sub_ != nullptr && sub_->parsed(); }
    // The exit status.
    virtual int run() = 0;
    // tune measures every kernel variant itself; every other command runs on the configured ones.
    virtual bool uses_configured_kernels() const { return true; }

protected:
    CLI::App* sub_ = nullptr;
};

// In the order `colibri --help` lists them.
std::unique_ptr<Command> start_command(CLI::App& app);
std::unique_ptr<Command> convert_command(CLI::App& app);
std::unique_ptr<Command> export_command(CLI::App& app);
std::unique_ptr<Command> check_command(CLI::App& app);
std::unique_ptr<Command> info_command(CLI::App& app);
std::unique_ptr<Command> logits_command(CLI::App& app);
std::unique_ptr<Command> route_command(CLI::App& app);
std::unique_ptr<Command> bench_command(CLI::App& app);
std::unique_ptr<Command> generate_command(CLI::App& app);
std::unique_ptr<Command> compare_command(CLI::App& app);
std::unique_ptr<Command> swap_command(CLI::App& app);
std::unique_ptr<Command> chat_command(CLI::App& app);
std::unique_ptr<Command> eval_command(CLI::App& app);
std::unique_ptr<Command> cache_sim_command(CLI::App& app);
std::unique_ptr<Command> serve_command(CLI::App& app);
std::unique_ptr<Command> tune_command(CLI::App& app);
std::unique_ptr<Command> placement_command(CLI::App& app);

// COLIBRI_KERNEL, else the tune cache, else CPUID; prints `colibri: COLIBRI_KERNEL: <why>` and returns false
// for a variant this binary or CPU cannot run (app/commands/tune.cpp).
bool configure_kernels_or_report();

}  // namespace colibri::cli
