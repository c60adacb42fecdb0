#include "chat_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <sstream>
#include <vector>

#include "engine/core/chat_prompt.h"
#include "engine/core/chat_service.h"
#include "engine/file/format.h"
#include "engine/core/generate.h"
#include "engine/core/session_follow.h"
#include "engine/core/session_mirror.h"
#include "engine/file/model_file.h"
#include "line_editor.h"

namespace colibri::cli {

namespace {

volatile sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) { g_interrupted = 1; }

// Ctrl-C while the chat runs stops the reply being generated (or clears the prompt's line) instead of ending
// the program. Installed without SA_RESTART so that a read at the prompt returns at once.
class InterruptHandler {
public:
    InterruptHandler() {
        struct sigaction sa = {};
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &previous_);
    }
    ~InterruptHandler() { sigaction(SIGINT, &previous_, nullptr); }
    InterruptHandler(const InterruptHandler&) = delete;
    InterruptHandler& operator=(const InterruptHandler&) = delete;
    // Clears a Ctrl-C that came while nothing was being generated (it must not stop the next reply).
    static void clear() { g_interrupted = 0; }
    static bool pending() { return g_interrupted != 0; }

private:
    struct sigaction previous_ = {};
};

// Rank 0 under mpirun: the chat ends (SIGTERM, or a rank lost while the user types).
std::atomic<bool> g_stop{false};

extern "C" void on_terminate(int) {
    g_stop.store(true);
    g_interrupted = 1;  // a reply being written stops too
}

// Rank 0 across ranks: the session tells the other ranks each operation, a heartbeat keeps them waiting while the
// user types, SIGTERM ends the chat; at the end they are told to stop.
class RankLead {
public:
    RankLead(Session& session, Communicator* ranks) : session_(session), mirror_(ranks) {}
    ~RankLead() { (void)finish(); }
    RankLead(const RankLead&) = delete;
    RankLead& operator=(const RankLead&) = delete;
    bool active() const { return mirror_.active(); }

    Status start(LineEditor& editor) {
        if (!active()) return Status::ok();
        // Without SA_RESTART: a read at the prompt returns at once. Left installed to the end (a late one is harmless).
        struct sigaction sa = {};
        sa.sa_handler = on_terminate;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, nullptr);
        session_.set_mirror(&mirror_, 0);
        editor.stop_when(&g_stop);
        const pthread_t main = pthread_self();
        return mirror_.start_heartbeat([main] {
            g_stop.store(true);
            pthread_kill(main, SIGTERM);  // a terminal's read, interrupted
        });
    }
    // Stops the other ranks; the error when one stopped answering.
    Status finish() {
        if (!active() || finished_) return Status::ok();
        finished_ = true;
        const Status gone = mirror_.lost();
        (void)mirror_.stop();
        session_.set_mirror(nullptr);
        return gone;
    }

private:
    Session& session_;
    SessionMirror mirror_;
    bool finished_ = false;
};

volatile sig_atomic_t g_follower_terms = 0;

// A follower takes SIGINT (Ctrl-C is for rank 0's reply) and its first SIGTERM (one sent to every rank reaches rank 0
// too, which then stops the others); a second SIGTERM ends it at once.
extern "C" void on_follower_signal(int sig) {
    if (sig != SIGTERM) return;
    if (g_follower_terms != 0) _exit(1);
    g_follower_terms = 1;
}

void print(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

const char* const kHelp =
    "Commands:\n"
    "  /help                     this list\n"
    "  /reset                    start a new conversation (the system prompt stays)\n"
    "  /swap L E DONOR [DL DE]   replace expert E of layer L with expert DE of layer DL of DONOR.bin, live\n"
    "  /exit                     leave (also Ctrl-D)\n"
    "Anything else is a message; begin it with // to send a message that starts with /.\n"
    "Ctrl-C stops the reply being written; the up and down arrows recall earlier lines.\n";

bool is_blank(const std::string& line) {
    return std::all_of(line.begin(), line.end(), [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// "/swap L E DONOR [DL DE]": swaps an expert of the loaded model in place.
void chat_swap(Model& model, const std::string& line) {
    std::istringstream in(line.substr(5));
    int64_t layer = -1, expert = -1, dl = -1, de = -1;
    std::string donor_path;
    in >> layer >> expert >> donor_path;
    if (layer < 0 || expert < 0 || donor_path.empty()) {
        std::fprintf(stderr, "usage: /swap LAYER EXPERT DONOR.bin [DONOR_LAYER DONOR_EXPERT]\n");
        return;
    }
    if (!(in >> dl >> de)) dl = layer, de = expert;
    if (layer > UINT32_MAX || expert > UINT32_MAX || dl < 0 || de < 0 || dl > UINT32_MAX || de > UINT32_MAX) {
        std::fprintf(stderr, "colibri: chat: /swap: layer and expert numbers must be below 2^32\n");
        return;
    }
    auto donor = ModelFile::open(donor_path);
    if (!donor) {
        std::fprintf(stderr, "colibri: chat: %s\n", donor.message().c_str());
        return;
    }
    const Status s = model.swap_expert(static_cast<uint32_t>(layer), static_cast<uint32_t>(expert), *donor.value(),
                                       static_cast<uint32_t>(dl), static_cast<uint32_t>(de));
    if (!s) std::fprintf(stderr, "colibri: chat: %s\n", s.message().c_str());
    else std::fprintf(stderr, "(layer %lld expert %lld swapped; the conversation so far keeps its cached keys and values)\n",
                      static_cast<long long>(layer), static_cast<long long>(expert));
}

using Clock = std::chrono::steady_clock;

// Streams a reply to stdout as the chat service produces it; Ctrl-C stops it.
struct TerminalPrinter final : TurnObserver {
    Clock::time_point start = Clock::now(), first_token = start;
    size_t streamed = 0, shown = 0;
    bool on_token(const TokenEvent& e) override {
        if (streamed++ == 0) first_token = Clock::now();
        print(e.text);
        shown += e.text.size();
        return !InterruptHandler::pending();
    }
};

// The statistics line after a reply: generated tokens and their rate, the prompt's tokens and theirs.
void print_statistics(size_t generated, double decode_seconds, size_t prompt_tokens, double prompt_seconds,
                      FinishReason finish) {
    // Timed from the first token printed to the last (TokenRate: the first token is the prompt's).
    const double decode_rate = TokenRate::of_reply(generated, decode_seconds).per_second();
    std::fprintf(stderr, "[%zu token%s, %.1f tokens/s; prompt %zu token%s, %.1f tokens/s%s]\n", generated,
                 generated == 1 ? "" : "s", decode_rate, prompt_tokens, prompt_tokens == 1 ? "" : "s",
                 TokenRate{prompt_tokens, prompt_seconds}.per_second(),
                 finish == FinishReason::Cancelled ? "; stopped" : finish == FinishReason::Length ? "; reached --max-tokens" : "");
}

}  // namespace

int follow_chat(Communicator& ranks, Session& session) {
    struct sigaction sa = {};
    sa.sa_handler = on_follower_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    Session* const sessions[] = {&session};
    if (Status s = follow_slots(ranks, sessions); !s) return std::fprintf(stderr, "colibri: chat: %s\n", s.message().c_str()), 1;
    return 0;
}

int run_chat(Model& model, Session& session, const SamplerConfig& sampling, const ChatOptions& options, Communicator* ranks) {
    InterruptHandler interrupts;
    LineEditor editor(options.history_path);
    RankLead lead(session, ranks);
    if (Status s = lead.start(editor); !s) return std::fprintf(stderr, "colibri: chat: %s\n", s.message().c_str()), 1;
    const std::string spread = lead.active() ? ", experts over " + std::to_string(ranks->size()) + " ranks" : "";
    if (editor.interactive())
        std::fprintf(stderr, "colibri chat: %s (%s%s). Type a message; /help lists the commands; Ctrl-C stops a reply; Ctrl-D exits.\n",
                     options.model_path.c_str(), format::family_name(model.family()), spread.c_str());
    Sampler sampler(sampling);
    auto mode = parse_speculate_mode(options.speculate);
    if (!mode) return std::fprintf(stderr, "colibri: chat: %s\n", mode.message().c_str()), 1;
    auto drafter = make_drafter(mode.value(), model);
    if (!drafter) return std::fprintf(stderr, "colibri: chat: %s\n", drafter.message().c_str()), 1;
    std::vector<ChatMessage> messages;
    if (!options.system_prompt.empty()) messages.push_back({"system", options.system_prompt});
    ChatService chat(model, session);
    chat.set_reuse_prefix(options.reuse_prefix);
    // End-of-turn tokens end a reply (with --ignore-eos they do not) and are never printed.
    TurnOptions turn;
    turn.reply.max_tokens = options.max_tokens;
    turn.drafter = drafter->get();
    (options.ignore_eos ? turn.reply.hidden_ids : turn.reply.stop_ids) = default_stop_ids(model);
    std::string line;
    for (;;) {
        const LineEditor::Outcome got = editor.read(line);
        if (got == LineEditor::Outcome::End) break;
        if (got == LineEditor::Outcome::Interrupted || is_blank(line)) continue;
        editor.remember(line);
        if (line[0] == '/' && line.rfind("//", 0) != 0) {
            const std::string command = line.substr(0, line.find_first_of(" \t"));
            if (command == "/exit" || command == "/quit") break;
            if (command == "/help") {
                std::fputs(kHelp, stderr);
            } else if (command == "/reset") {
                messages.erase(messages.begin() + (options.system_prompt.empty() ? 0 : 1), messages.end());
                chat.reset();
                std::fprintf(stderr, "(conversation reset)\n");
            } else if (command == "/swap" && lead.active()) {
                std::fprintf(stderr, "colibri: chat: /swap: not across ranks (each rank holds its own share of the experts)\n");
            } else if (command == "/swap") {
                chat_swap(model, line);
            } else {
                std::fprintf(stderr, "colibri: chat: unknown command '%s' (/help lists them; // sends a message starting with /)\n",
                             command.c_str());
            }
            continue;
        }
        if (line.rfind("//", 0) == 0) line.erase(0, 1);
        // One bad line costs that line, not the conversation.
        if (!is_valid_utf8(line)) {
            std::fprintf(stderr, "colibri: chat: the line is not valid UTF-8; it was not sent (the conversation goes on)\n");
            continue;
        }
        messages.push_back({"user", line});
        auto encoded = chat_prompt_ids(model, messages);
        if (!encoded) {  // a template's message begins with "chat template: "
            std::fprintf(stderr, "colibri: chat: %s (the line was not sent)\n", encoded.message().c_str());
            messages.pop_back();
            continue;
        }
        const std::vector<int32_t> ids = std::move(encoded.value());
        if (ids.size() + static_cast<size_t>(options.max_tokens) > session.context()) {
            // Not fatal: the user can /reset and go on.
            std::fprintf(stderr, "colibri: chat: conversation would exceed the context of %u tokens; /reset to start over\n",
                         session.context());
            messages.pop_back();
            continue;
        }
        TerminalPrinter printer;
        InterruptHandler::clear();
        // The chat service keeps the KV cache's common prefix and evaluates only what is new.
        auto out = chat.run(ids, sampler, turn, &printer);
        const Clock::time_point end = Clock::now();
        if (out) print(out->text.substr(std::min(printer.shown, out->text.size())));  // an unfinished character at a stop
        std::printf("\n");
        std::fflush(stdout);
        if (!out) {
            std::fprintf(stderr, "colibri: chat: %s\n", out.message().c_str());
            return 1;
        }
        print_statistics(out->tokens.size(), std::chrono::duration<double>(end - printer.first_token).count(), out->prompt_evaluated,
                         std::chrono::duration<double>(printer.first_token - printer.start).count(), out->finish);
        if (turn.drafter && options.report_speculation) std::fprintf(stderr, "[%s]\n", speculation_summary(mode.value(), out->speculation, model.hparams().n_experts_active).c_str());
        InterruptHandler::clear();
        messages.push_back({"assistant", out->reply});
        if (g_stop.load()) break;
    }
    if (editor.interactive()) std::fprintf(stderr, "\n");
    if (Status gone = lead.finish(); !gone) return std::fprintf(stderr, "colibri: chat: %s\n", gone.message().c_str()), 1;
    return 0;
}

}  // namespace colibri::cli
