// `colibri chat`: the interactive chat loop on a loaded model (the Studio's chat view, in a terminal).
#pragma once
#include <string>

#include "engine/core/model.h"
#include "engine/core/sampler.h"
#include "engine/core/session.h"
#include "engine/distributed/communicator.h"

namespace colibri::cli {

struct ChatOptions {
    std::string model_path;     // shown in the banner
    std::string system_prompt;  // kept across /reset
    int max_tokens = 256;       // longest reply: half the demo model's context of 512, so a turn fits
    bool reuse_prefix = true;   // false: re-evaluate the whole conversation every turn (for checking)
    bool ignore_eos = false;    // generate up to max_tokens whatever comes (measuring, testing Ctrl-C)
    std::string history_path;   // the terminal's line history (empty: none)
    std::string speculate = "off";  // --speculate (engine/core/speculation.h): the same replies, fewer passes
    bool report_speculation = false;   // a statistics line after each reply (--speculate given)
};

// Reads messages from the terminal (libedit: line editing, history) or from piped stdin, streams each reply to
// stdout and its statistics to stderr. Ctrl-C stops the reply being written, not the program; /help lists the
// commands. Returns the exit code.
// Under mpirun (`ranks` of several, this rank 0): the session tells the other ranks every operation
// (engine/core/session_mirror.h), a heartbeat keeps them waiting while the user types, SIGTERM ends the chat, and the
// end (or a rank that stops answering: one line, exit 1) stops them.
int run_chat(Model& model, Session& session, const SamplerConfig& sampling, const ChatOptions& options, Communicator* ranks = nullptr);
// Every other rank: follows rank 0's chat on `session` until it ends (0) or stops answering (1, one line).
int follow_chat(Communicator& ranks, Session& session);

}  // namespace colibri::cli
