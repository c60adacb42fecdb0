#include "engine/core/generate.h"

#include <algorithm>

namespace colibri {

Result<std::vector<int32_t>> generate(Session& session, Sampler& sampler, std::span<const int32_t> prompt,
                                      const GenerateRequest& request, const std::function<bool(int32_t)>& on_token,
                                      GenerateStop* stop) {
    GenerateStop why = GenerateStop::MaxTokens;
    if (prompt.size() > session.context() - session.position())
        return error("the prompt (" + std::to_string(prompt.size()) + " tokens) does not fit the context: " +
                     std::to_string(session.context() - session.position()) + " of " + std::to_string(session.context()) +
                     " positions are free");
    auto logits = session.eval(prompt);
    if (!logits) return logits.status();
    std::vector<int32_t> history(prompt.begin(), prompt.end());
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(std::max(0, request.max_tokens)));
    TokenFeeder feeder(session, request.drafter);
    for (int32_t i = 0; i < request.max_tokens; ++i) {
        const int32_t next = sampler.sample(logits.value(), history);
        out.push_back(next);
        history.push_back(next);
        const bool at_stop = std::find(request.stop_ids.begin(), request.stop_ids.end(), next) != request.stop_ids.end();
        if (on_token && !on_token(next)) {
            why = GenerateStop::Callback;
            break;
        }
        if (at_stop) {
            why = GenerateStop::StopToken;
            break;
        }
        if (i + 1 == request.max_tokens) break;
        if (feeder.position() >= session.context()) {  // the next token has no position left to be evaluated at
            why = GenerateStop::ContextFull;
            break;
        }
        // Drafts only for tokens plain decoding would evaluate too (not the last of max_tokens).
        logits = feeder.feed(history, static_cast<uint32_t>(request.max_tokens - i - 2));
        if (!logits) return logits.status();
    }
    feeder.finish();
    if (request.speculation) *request.speculation = feeder.stats();
    if (stop) *stop = why;
    return out;
}

std::vector<int32_t> default_stop_ids(const Model& model) {
    std::vector<int32_t> ids;
    auto add = [&ids](int32_t id) {
        if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    };
    add(model.hparams().eos_id);
    if (const Tokenizer* tok = model.tokenizer())
        for (int32_t id : tok->end_of_turn_ids()) add(id);
    return ids;
}

}  // namespace colibri
