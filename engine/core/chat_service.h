// The chat service: the one turn loop that `colibri chat`, the Studio's EngineWorker, the C API, `colibri eval`
// and `colibri serve` share. It renders a conversation with the model's chat template and encodes it, keeps
// the longest prefix the session already holds in its KV cache, evaluates the rest, and streams the reply:
// sampling, end-of-turn ids, stop strings, UTF-8 text that never splits a character, log-probabilities.
//
// A reply's decoding (ReplyStream) is separate from evaluating positions, so that the server's batch
// scheduler, which evaluates many conversations in one forward pass, drives the very same ReplyStream.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/token_rate.h"
#include "engine/base/status.h"
#include "engine/core/chat_prompt.h"
#include "engine/core/generate.h"
#include "engine/core/model.h"
#include "engine/core/sampler.h"
#include "engine/core/session.h"
#include "engine/core/speculation.h"
#include "engine/text/chat_template.h"
#include "engine/text/utf8.h"

namespace colibri {

// The conversation's prompt ids: chat_prompt_ids (chat_prompt.h); end-of-turn ids: default_stop_ids (generate.h).

struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0.0f;  // natural log of the model's probability (its softmax, before any sampling setting)
};

enum class FinishReason : uint8_t {
    None,       // still generating
    Stop,       // an end-of-turn id or a stop string
    Length,     // max_tokens reached
    Cancelled,  // the caller stopped it
};
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", ""

struct ReplyOptions {
    int32_t max_tokens = 256;
    std::vector<int32_t> stop_ids;          // end the reply; not part of its text
    std::vector<std::string> stop_strings;  // end the reply where the text first contains one; cut from the text
    // -1: no log-probabilities; 0: the sampled token's; N > 0: also the N most likely tokens'.
    int32_t top_logprobs = -1;
    // Never shown and left out of reply(), without ending the reply: end-of-turn ids when the caller ignores
    // them (`colibri chat --ignore-eos`).
    std::vector<int32_t> hidden_ids;
    // Added to these tokens' logits before sampling (the OpenAI API's logit_bias); log-probabilities stay the
    // model's own.
    std::vector<std::pair<int32_t, float>> logit_bias;
};

// One generated token as the caller shows it.
struct TokenEvent {
    uint32_t index = 0;       // 0 for the reply's first token
    int32_t id = -1;
    std::string text;         // text that can be shown now: complete characters, stop strings held back
    bool end_of_turn = false; // one of stop_ids (its text is never shown)
    TokenLogprob logprob;                  // when top_logprobs >= 0
    std::vector<TokenLogprob> top;         // top_logprobs most likely, descending
};

// One reply being generated. Fed the logits after each evaluated position, it samples the next token and says
// what to show and whether the reply is over. It holds no session: whoever evaluates positions drives it.
class ReplyStream {
public:
    // history: the tokens before the reply (the repetition penalty's window looks at them).
    ReplyStream(const Model& model, Sampler& sampler, ReplyOptions options, std::span<const int32_t> history);

    // Samples from the logits after the last evaluated position. Call only while !done().
    const TokenEvent& next(std::span<const float> logits);
    // Ends the reply early (the caller's stop, a disconnected client).
    void cancel();

    bool done() const { return finish_ != FinishReason::None; }
    FinishReason finish() const { return finish_; }
    // What is left to show when the reply is done (text held back for a stop string that never came, or an
    // incomplete character at the very end); empty when a stop string ended it.
    std::string flush();
    const std::vector<int32_t>& tokens() const { return tokens_; }  // generated ids, an end-of-turn id included
    const std::string& text() const { return text_; }               // everything shown so far
    // The reply as a message for the conversation's next turn: tokens without end-of-turn ids, decoded with
    // special tokens skipped.
    std::string reply() const;

private:
    // Appends bytes to the held-back text and returns what can be shown (all of it, or up to a stop string).
    std::string release(const std::string& bytes);
    void fill_logprobs(std::span<const float> logits, int32_t chosen);

    const Model& model_;
    Sampler& sampler_;
    ReplyOptions options_;
    std::vector<int32_t> history_;
    std::vector<int32_t> tokens_;
    Utf8Stream utf8_;
    std::string held_;   // complete text not shown yet: it may be the start of a stop string
    std::string text_;
    TokenEvent event_;
    FinishReason finish_ = FinishReason::None;
    std::vector<int32_t> order_;  // top_logprobs' sort, kept between tokens
    std::vector<float> biased_;   // the logits with logit_bias added, kept between tokens
};

struct TurnOptions {
    ReplyOptions reply;
    // Tokens per Session::eval while evaluating the prompt (0: all at once, in the session's own chunks); the
    // caller may stop between steps, and sees each step in TurnObserver::before_eval.
    uint32_t prompt_step = 0;
    // Also evaluate the last generated token, so that it has a trace and the cache holds the whole reply.
    bool evaluate_last = false;
    // Speculative decoding (speculation.h): the reply is the same, fewer passes when drafts are right. A check's
    // rows are one before_eval (generated) with all its tokens; an accepted draft's token needs no evaluation.
    Drafter* drafter = nullptr;
};

// Hooks into a turn; all run on the thread that runs the turn.
class TurnObserver {
public:
    virtual ~TurnObserver() = default;
    virtual void on_started(uint32_t /*reused*/) {}
    // Around each Session::eval: a prompt step, one generated token, or (speculative decoding) a check: the
    // generated token and its drafts, rows that plain decoding would evaluate one at a time, of which those after
    // the first the sampler may reject. after_eval's logits are the first row's.
    virtual void before_eval(uint32_t /*position*/, std::span<const int32_t> /*tokens*/, bool /*generated*/) {}
    virtual void after_eval(std::span<const float> /*logits*/) {}
    // A generated token whose check drafted it: nothing is evaluated, its logits are that check's row.
    virtual void after_checked_row(std::span<const float> /*logits*/) {}
    // A generated token, before it is evaluated; false ends the turn as cancelled.
    virtual bool on_token(const TokenEvent&) { return true; }
    // Asked before each step; true ends the turn as cancelled.
    virtual bool cancelled() { return false; }
};

struct TurnResult {
    std::vector<int32_t> tokens;  // generated ids, an end-of-turn id included
    std::string text;             // all that was shown (ReplyStream::text plus its flush)
    std::string reply;            // ReplyStream::reply(): the message for the next turn
    FinishReason finish = FinishReason::None;
    uint32_t reused = 0;          // prompt tokens the KV cache already held
    uint32_t prompt_evaluated = 0;
    uint32_t decode_evaluated = 0;  // generated tokens evaluated within decode_seconds (the last one only with evaluate_last)
    double prompt_seconds = 0.0, decode_seconds = 0.0;
    uint32_t context_used = 0;    // the session's position afterwards
    SpeculationStats speculation;
    // The rates every front end shows (engine/base/token_rate.h).
    TokenRate prompt_rate() const { return {prompt_evaluated, prompt_seconds}; }
    TokenRate decode_rate() const { return {decode_evaluated, decode_seconds}; }
};

// Evaluates `prompt` on top of what the session holds, then runs the reply's loop. The one loop of every
// caller: ChatService::run below and generate() (engine/core/generate.h).
Result<TurnResult> run_reply(const Model& model, Session& session, std::span<const int32_t> prompt,
                             std::span<const int32_t> history, Sampler& sampler, const TurnOptions& options,
                             TurnObserver* observer);

// A conversation on one session: remembers which tokens the session holds so that each turn evaluates only
// what is new.
class ChatService {
public:
    ChatService(const Model& model, Session& session) : model_(model), session_(session) {}

    // Generates a reply to `prompt`, the whole conversation's tokens (chat_prompt_ids, or ids of the caller's).
    // Checks every id and that the prompt and max_tokens fit the context before touching the session.
    Result<TurnResult> run(std::span<const int32_t> prompt, Sampler& sampler, const TurnOptions& options,
                           TurnObserver* observer = nullptr);
    // Forgets the session's tokens: the next turn evaluates from scratch.
    void reset();
    // Off: every turn evaluates the whole conversation (for checking that reuse changes nothing).
    void set_reuse_prefix(bool on) { reuse_prefix_ = on; }

    const Model& model() const { return model_; }
    Session& session() { return session_; }
    std::span<const int32_t> cached() const { return cached_; }

private:
    const Model& model_;
    Session& session_;
    std::vector<int32_t> cached_;  // the tokens the session holds
    bool reuse_prefix_ = true;
};

}  // namespace colibri
