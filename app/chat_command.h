// `colibri chat`: the terminal twin of the Studio's chat, over the chat service (engine/chat_service.h).
#pragma once
#include <string>

#include "engine/sampler.h"

namespace colibri {
class Model;
class Session;
}  // namespace colibri

namespace colibri::cli {

struct ChatArgs {
    std::string model_path;  // for the banner
    std::string system_prompt;
    int max_tokens = 256;
    bool reuse_prefix = true;
    SamplerConfig sampling;
};

// Runs the conversation until end of input or /exit; returns the exit code.
int cmd_chat(Model& model, Session& session, const ChatArgs& args);

}  // namespace colibri::cli
