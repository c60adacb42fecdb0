#include "generate.h"

namespace colibri {

namespace {

struct CallbackObserver final : TurnObserver {
    const std::function<bool(const TokenEvent&)>& on_token_;
    explicit CallbackObserver(const std::function<bool(const TokenEvent&)>& f) : on_token_(f) {}
    bool on_token(const TokenEvent& e) override { return !on_token_ || on_token_(e); }
};

}  // namespace

Result<std::vector<int32_t>> generate(Session& session, Sampler& sampler, std::span<const int32_t> prompt,
                                      const GenerateRequest& request, const std::function<bool(const TokenEvent&)>& on_token) {
    TurnOptions options;
    options.reply.max_tokens = request.max_tokens;
    options.reply.stop_ids = request.stop_ids;
    CallbackObserver observer(on_token);
    auto result = run_reply(session.model(), session, prompt, prompt, sampler, options, &observer);
    if (!result) return result.status();
    return std::move(result->tokens);
}

}  // namespace colibri
