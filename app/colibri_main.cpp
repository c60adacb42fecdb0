// colibri: the command-line interface. Entry point only: each subcommand is a file under app/commands/, and the
// work happens in libcolibri, libcolibri_tools and libcolibri_server.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <vector>

#include "commands/command.h"
#include "commands/model_options.h"

using namespace colibri::cli;

int main(int argc, char** argv) {
    CLI::App app{"colibri: a CPU inference engine for Mixture-of-Experts models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "colibri 0.1.0");
    std::vector<std::unique_ptr<Command>> commands;
    for (auto make : {start_command, convert_command, export_command, check_command, info_command, logits_command, route_command,
                      bench_command, generate_command, compare_command, swap_command, chat_command, eval_command,
                      cache_sim_command, serve_command, tune_command, placement_command})
        commands.push_back(make(app));

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "colibri: usage: %s (see colibri --help)\n", e.what());
        return 2;
    }

    for (const std::unique_ptr<Command>& command : commands) {
        if (!command->chosen()) continue;
        // COLIBRI_KERNEL, else the tune cache; tune measures every variant itself and rewrites the cache.
        if (command->uses_configured_kernels() && !configure_kernels_or_report()) return 1;
        try {
            return command->run();
        } catch (const std::bad_alloc&) {
            return fail("error", "out of memory");
        } catch (const std::exception& e) {
            return fail("error", e.what());
        }
    }
    return 1;
}
