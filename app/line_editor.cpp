#include "line_editor.h"

#include <histedit.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "engine/file/temp_output.h"

namespace colibri::cli {

struct LineEditor::Editline {
    EditLine* el = nullptr;
    History* history = nullptr;
    bool interrupted = false;  // Ctrl-C ended the line being read
    // Bound to Ctrl-C while the editor reads: the key arrives as a character, not as SIGINT (the terminal's ISIG is
    // off in edit mode). A signal would race the editor: one that lands between two reads (after the echo of one
    // key, before the read of the next) only sets the handler's flag, and the read that follows blocks with the
    // typed line still there. Ending the read as if Enter were pressed, with a mark to drop the line, has no window.
    static unsigned char on_ctrl_c(EditLine* el, int) {
        Editline* self = nullptr;
        if (el_get(el, EL_CLIENTDATA, &self) == 0 && self != nullptr) self->interrupted = true;
        std::fputs("^C\n", stderr);
        return CC_NEWLINE;
    }
    // Ctrl-Z, also a key in edit mode: suspends the chat as the terminal would, in cooked mode while stopped (the
    // shell expects it) and back in edit mode, the line redrawn, when continued.
    static unsigned char on_ctrl_z(EditLine* el, int) {
        el_set(el, EL_PREP_TERM, 0);
        ::kill(0, SIGTSTP);
        el_set(el, EL_PREP_TERM, 1);
        return CC_REDISPLAY;
    }
    ~Editline() {
        if (el) el_end(el);
        if (history) history_end(history);
    }
};

namespace {
const char* prompt(EditLine*) { return "> "; }
}  // namespace

std::string default_history_path() {
    namespace fs = std::filesystem;
    const char* state = std::getenv("XDG_STATE_HOME");
    const char* home = std::getenv("HOME");
    fs::path dir;
    if (state != nullptr && *state == '/') dir = fs::path(state) / "colibri";
    else if (home != nullptr && *home == '/') dir = fs::path(home) / ".local/state/colibri";
    else return {};
    return (dir / "chat_history").string();
}

LineEditor::LineEditor(const std::string& history_path)
    : interactive_(isatty(STDIN_FILENO) && isatty(STDERR_FILENO)), history_path_(history_path) {
    if (!interactive_) return;
    el_ = std::make_unique<Editline>();
    // Editing output goes to stderr, like the prompt: stdout carries only the replies.
    el_->el = el_init("colibri", stdin, stderr, stderr);
    el_->history = history_init();
    if (el_->el == nullptr || el_->history == nullptr) {
        el_.reset();
        return;
    }
    HistEvent ev;
    history(el_->history, &ev, H_SETSIZE, 1000);
    history(el_->history, &ev, H_SETUNIQUE, 1);
    el_set(el_->el, EL_EDITOR, "emacs");
    el_set(el_->el, EL_PROMPT, prompt);
    el_set(el_->el, EL_HIST, history, el_->history);
    el_set(el_->el, EL_CLIENTDATA, el_.get());
    el_set(el_->el, EL_SETTY, "-d", "-isig", static_cast<char*>(nullptr));
    // Functions are added through the wide interface: the narrow el_set copies their names and never frees them.
    el_wset(el_->el, EL_ADDFN, L"colibri-interrupt", L"Drop the line being typed (Ctrl-C)", &Editline::on_ctrl_c);
    el_set(el_->el, EL_BIND, "^C", "colibri-interrupt", static_cast<char*>(nullptr));
    el_wset(el_->el, EL_ADDFN, L"colibri-suspend", L"Suspend the chat (Ctrl-Z)", &Editline::on_ctrl_z);
    el_set(el_->el, EL_BIND, "^Z", "colibri-suspend", static_cast<char*>(nullptr));
    el_source(el_->el, nullptr);  // the user's ~/.editrc, as other libedit programs read it
    // libedit opens the file itself: only a regular file is given to it (a FIFO there would block the start).
    if (history_path_.empty()) return;
    struct stat st {};
    if (::stat(history_path_.c_str(), &st) != 0) return;  // none yet
    if (const std::string what = not_replaceable(history_path_); !what.empty()) {
        // A link to /dev/null is how a history is turned off: nothing to say about that.
        if (!S_ISCHR(st.st_mode))
            std::fprintf(stderr, "colibri: warning: chat history %s: not a regular file (%s): not read or written\n",
                         history_path_.c_str(), what.c_str());
        history_path_.clear();
        return;
    }
    history(el_->history, &ev, H_LOAD, history_path_.c_str());
}

LineEditor::~LineEditor() = default;

bool LineEditor::wait_for_input() const {
    if (stop_ == nullptr) return true;
    pollfd in{STDIN_FILENO, POLLIN, 0};
    while (!stopping()) {
        const int ready = ::poll(&in, 1, 100);
        if (ready > 0 || (ready < 0 && errno != EINTR)) return true;  // input, its end or an error: the read says which
    }
    return false;
}

bool LineEditor::read_plain(std::string& line) {
    line.clear();
    for (;;) {
        const size_t newline = buffer_.find('\n');
        if (newline != std::string::npos) {
            line = buffer_.substr(0, newline);
            buffer_.erase(0, newline + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return true;
        }
        char chunk[4096];
        if (!wait_for_input()) return false;
        const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;  // Ctrl-C while waiting for piped input: nothing to stop
        if (n <= 0) {  // end of input: a last line without its newline still counts
            if (buffer_.empty()) return false;
            line = std::exchange(buffer_, std::string());
            return true;
        }
        buffer_.append(chunk, static_cast<size_t>(n));
    }
}

LineEditor::Outcome LineEditor::read(std::string& line) {
    if (stopping()) return Outcome::End;
    if (!el_) {
        if (interactive_) std::fputs("> ", stderr);
        return read_plain(line) ? Outcome::Line : Outcome::End;
    }
    int count = 0;
    errno = 0;
    el_->interrupted = false;
    // The terminal goes into edit mode before the prompt shows. el_gets would otherwise draw the prompt first and
    // switch the terminal when it reads the first key, and keys typed in between meet the cooked terminal: echoed
    // twice, or a Ctrl-D turned into an end-of-file mark that edit mode then reads as a NUL key, so the chat never
    // ends.
    el_set(el_->el, EL_PREP_TERM, 1);
    const char* got = el_gets(el_->el, &count);
    if (el_->interrupted) return Outcome::Interrupted;  // Ctrl-C typed at the prompt: on_ctrl_c ended the line
    if (got == nullptr || count <= 0) {
        // A SIGINT from elsewhere (kill -INT; the caller's handler has no SA_RESTART) interrupts the read: a fresh
        // prompt.
        if (count < 0 && errno == EINTR) {
            el_reset(el_->el);
            std::fputs("\n", stderr);
            return stopping() ? Outcome::End : Outcome::Interrupted;
        }
        return Outcome::End;
    }
    line.assign(got, static_cast<size_t>(count));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return Outcome::Line;
}

void LineEditor::remember(const std::string& line) {
    if (!el_ || line.empty()) return;
    HistEvent ev;
    history(el_->history, &ev, H_ENTER, line.c_str());
    if (history_path_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(history_path_).parent_path(), ec);
    // Committed as every output is (engine/file/temp_output.h): a full disk or a crash keeps the old history whole.
    TempOutput out;
    Status saved = out.create(history_path_);
    if (saved) {
        FILE* f = fdopen(dup(out.fd()), "w");
        const bool written = f != nullptr && history(el_->history, &ev, H_SAVE_FP, f) >= 0 && std::fflush(f) == 0 && !std::ferror(f);
        const int e = errno;
        if (f != nullptr) std::fclose(f);
        saved = written ? out.commit() : error(history_path_ + ": " + std::strerror(e ? e : EIO));
    }
    if (!saved) {  // said once: the chat goes on without saving
        std::fprintf(stderr, "colibri: warning: chat history %s; not saved from now on\n", saved.message().c_str());
        history_path_.clear();
    }
}

}  // namespace colibri::cli
