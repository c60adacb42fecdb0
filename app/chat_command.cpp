#include "chat_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "engine/chat_service.h"
#include "engine/model.h"
#include "engine/session.h"

namespace colibri::cli {

namespace {

void print(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

// Streams the reply to stdout as it is generated.
struct TerminalObserver final : TurnObserver {
    bool on_token(const TokenEvent& e) override {
        print(e.text);
        return true;
    }
};

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

}  // namespace

int cmd_chat(Model& model, Session& session, const ChatArgs& args) {
    if (model.tokenizer() == nullptr) {
        std::fprintf(stderr, "colibri: chat: %s: model has no tokenizer (convert a directory with tokenizer.json)\n",
                     args.model_path.c_str());
        return 1;
    }
    const bool interactive = isatty(STDIN_FILENO);
    if (interactive)
        std::fprintf(stderr, "colibri chat: %s (%s). Type a message; /reset starts over; /swap L E DONOR swaps an expert; Ctrl-D exits.\n",
                     args.model_path.c_str(), format::family_name(model.family()));
    ChatService chat(model, session);
    chat.set_reuse_prefix(args.reuse_prefix);
    Sampler sampler(args.sampling);  // one generator for the whole conversation
    TurnOptions options;
    options.reply.max_tokens = args.max_tokens;
    options.reply.stop_ids = default_stop_ids(model);
    std::vector<ChatMessage> messages;
    if (!args.system_prompt.empty()) messages.push_back({"system", args.system_prompt});

    std::string line;
    for (;;) {
        if (interactive) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        if (line == "/reset") {
            messages.erase(messages.begin() + (args.system_prompt.empty() ? 0 : 1), messages.end());
            chat.reset();
            std::fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (line.rfind("/swap", 0) == 0) {
            chat_swap(model, line);
            continue;
        }
        if (line.empty()) continue;
        messages.push_back({"user", line});
        auto ids = chat_prompt_ids(model, messages);
        if (!ids) {
            std::fprintf(stderr, "colibri: chat: %s\n", ids.message().c_str());
            return 1;
        }
        if (ids->size() + static_cast<size_t>(std::max(args.max_tokens, 0)) > session.context()) {
            // Not fatal: the user can /reset and go on.
            std::fprintf(stderr, "colibri: chat: conversation would exceed the context of %u tokens; /reset to start over\n",
                         session.context());
            messages.pop_back();
            continue;
        }
        TerminalObserver terminal;
        auto result = chat.run(ids.value(), sampler, options, &terminal);
        print("\n");
        if (!result) {
            std::fprintf(stderr, "colibri: chat: %s\n", result.message().c_str());
            return 1;
        }
        messages.push_back({"assistant", result->reply});
    }
    if (interactive) std::fprintf(stderr, "\n");
    return 0;
}

}  // namespace colibri::cli
