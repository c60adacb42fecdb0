// `colibri start`: what the README's first command ends with. With a display ($DISPLAY or $WAYLAND_DISPLAY) and
// Colibri Studio built beside this program it opens the Studio on the model (the demo model by default); else
// the terminal chat, saying why in one line.
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "command.h"
#include "model_options.h"

#ifndef COLIBRI_DEMO_MODEL
#define COLIBRI_DEMO_MODEL ""
#endif

namespace colibri::cli {

namespace {

namespace fs = std::filesystem;

bool set(const char* var) {
    const char* v = std::getenv(var);
    return v != nullptr && *v != '\0';
}

// Runs the program in place of this one; returns only when it could not be started.
int exec(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    ::execv(args[0], args.data());
    return fail("start", argv[0] + ": " + std::strerror(errno));
}

class Start final : public Command {
public:
    explicit Start(CLI::App& app) {
        sub_ = app.add_subcommand("start", "open Colibri Studio on the demo model, or the terminal chat without a display");
        sub_->add_option("-m,--model", model_, "model file (.bin)")->capture_default_str();
        sub_->add_flag("--terminal", terminal_, "the terminal chat even with a display");
        sub_->add_flag("--dry-run", dry_run_, "print the command it would run, and run nothing");
        sub_->footer("Colibri Studio opens when $DISPLAY or $WAYLAND_DISPLAY is set and colibri-studio was built beside this "
                     "program (Qt 6); otherwise `colibri chat` runs in the terminal.");
    }
    int run() override {
        std::error_code ec;
        const fs::path self = fs::read_symlink("/proc/self/exe", ec);
        if (ec) return fail("start", std::string("cannot find this program: ") + ec.message());
        if (!fs::exists(model_, ec)) return fail("start", model_ + ": no such file (build the demo model with `cmake --build build`)");
        const fs::path studio = self.parent_path() / "colibri-studio";
        const bool display = set("DISPLAY") || set("WAYLAND_DISPLAY");
        const bool have_studio = fs::exists(studio, ec) && ::access(studio.c_str(), X_OK) == 0;
        std::vector<std::string> argv;
        if (!terminal_ && display && have_studio) {
            argv = {studio.string(), model_};
        } else {
            const char* why = terminal_       ? "--terminal was given"
                              : !display      ? "no display ($DISPLAY and $WAYLAND_DISPLAY are not set)"
                                              : "Colibri Studio was not built (it needs Qt 6)";
            std::fprintf(stderr, "colibri: start: %s: starting the chat in this terminal instead of Colibri Studio\n", why);
            argv = {self.string(), "chat", "-m", model_};
        }
        if (dry_run_) {
            for (size_t i = 0; i < argv.size(); ++i) std::printf("%s%s", i ? " " : "", argv[i].c_str());
            std::printf("\n");
            return 0;
        }
        return exec(argv);
    }

private:
    std::string model_ = COLIBRI_DEMO_MODEL;
    bool terminal_ = false;
    bool dry_run_ = false;
};

}  // namespace

std::unique_ptr<Command> start_command(CLI::App& app) { return std::make_unique<Start>(app); }

}  // namespace colibri::cli
