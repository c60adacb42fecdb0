// Draft tokens for speculative decoding: a cheap guess at the next few tokens, which the model then checks in one
// batched eval (the weights, and the union of the drafted tokens' experts, read once for all of them). A drafter
// never changes what is generated, only how many tokens one pass over the weights yields: every drafted token is
// kept only where the sampler, drawing from the model's own logits at that position, picks the same token.
//
// Two drafters: prompt lookup (the continuation of an earlier occurrence of the last few tokens, for replies that
// quote or edit their context) and the model's multi-token-prediction head (DeepSeek-V3, GLM-4.5, Qwen3.5/Next).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace colibri {

class Session;

// One spelling everywhere: `--speculate lookup|mtp|off` on generate, chat, bench and serve, and the server's
// request field "speculate".
enum class SpeculateMode { Off, Lookup, Mtp };

class Drafter {
public:
    virtual ~Drafter() = default;
    // `session` has evaluated every token of `history` except the last one (just sampled, about to be fed).
    // Writes up to drafts.size() guesses for the tokens that follow history.back() and returns how many (0: no
    // guess, the step decodes one token as usual).
    virtual uint32_t propose(Session& session, std::span<const int32_t> history, std::span<int32_t> drafts) = 0;
    // After the check: of `proposed` drafts the first `accepted` were kept. A drafter with state of its own (the
    // MTP head's KV cache) cuts it back to match the session.
    virtual void on_verified(uint32_t proposed, uint32_t accepted) { (void)proposed, (void)accepted; }
    // The session was reset or truncated (a new or rewound conversation): forget what depends on it.
    virtual void reset() {}
};

}  // namespace colibri
