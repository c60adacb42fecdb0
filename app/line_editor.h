// `colibri chat`'s input: on a terminal, libedit's line editing (emacs keys, arrows) with a history kept
// across runs; otherwise plain lines from stdin. Ctrl-C at the prompt clears the line instead of quitting.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace colibri::cli {

class LineEditor {
public:
    // history_path: where the terminal's history is loaded from and saved to (empty: none).
    explicit LineEditor(const std::string& history_path);
    ~LineEditor();
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    enum class Outcome { Line, Interrupted, End };
    // Reads one line without its newline. Interrupted: Ctrl-C at the prompt (the line is dropped).
    Outcome read(std::string& line);
    // Adds a line to the history (and the history file).
    void remember(const std::string& line);
    bool interactive() const { return interactive_; }
    // A read waiting for input ends (End) once *flag is set, by a signal handler or another thread: piped input is
    // polled for it every 100 ms, a terminal's read is interrupted by the signal. Null: never.
    void stop_when(const std::atomic<bool>* flag) { stop_ = flag; }

private:
    struct Editline;
    bool read_plain(std::string& line);  // from stdin, unbuffered by stdio so that a signal cannot lose input
    bool interactive_ = false;
    std::string history_path_;
    std::unique_ptr<Editline> el_;
    std::string buffer_;  // read_plain's bytes after the last line
    const std::atomic<bool>* stop_ = nullptr;
    bool stopping() const { return stop_ != nullptr && stop_->load(); }
    bool wait_for_input() const;  // false: stopping() before input came
};

// $XDG_STATE_HOME/colibri/chat_history, else ~/.local/state/colibri/chat_history (empty when neither is known).
std::string default_history_path();

}  // namespace colibri::cli
