#include "engine/core/chat_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace colibri {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool contains(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
        case FinishReason::None: break;
    }
    return "";
}

// ---- ReplyStream ----

ReplyStream::ReplyStream(const Model& model, Sampler& sampler, ReplyOptions options, std::span<const int32_t> history)
    : model_(model), sampler_(sampler), options_(std::move(options)), history_(history.begin(), history.end()) {
    std::erase_if(options_.stop_strings, [](const std::string& s) { return s.empty(); });
    tokens_.reserve(static_cast<size_t>(std::clamp(options_.max_tokens, 0, 1 << 16)));
    if (options_.max_tokens <= 0) finish_ = FinishReason::Length;
}

void ReplyStream::cancel() {
    if (!done()) finish_ = FinishReason::Cancelled;
}

std::string ReplyStream::release(const std::string& bytes) {
    held_ += bytes;
    if (options_.stop_strings.empty()) return std::exchange(held_, std::string());
    // The earliest stop string in the held text ends the reply there.
    size_t match = std::string::npos;
    for (const std::string& s : options_.stop_strings) match = std::min(match, held_.find(s));
    if (match != std::string::npos) {
        std::string out = held_.substr(0, match);
        held_.clear();
        utf8_.flush();  // what followed the stop string is dropped, an unfinished character too
        finish_ = FinishReason::Stop;
        return out;
    }
    // Hold back the longest tail that could still grow into a stop string; show the rest.
    size_t keep = 0;
    for (const std::string& s : options_.stop_strings)
        for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string ReplyStream::flush() {
    std::string out = std::exchange(held_, std::string()) + utf8_.flush();
    text_ += out;
    return out;
}

void ReplyStream::fill_logprobs(std::span<const float> logits, int32_t chosen) {
    float max = -INFINITY;
    for (float l : logits) max = std::max(max, l);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(double(l) - double(max));
    const double log_z = double(max) + std::log(sum);
    auto logprob = [&](int32_t id) { return static_cast<float>(double(logits[static_cast<size_t>(id)]) - log_z); };
    event_.logprob = {chosen, logprob(chosen)};
    event_.top.clear();
    const size_t n = std::min<size_t>(static_cast<size_t>(std::max(options_.top_logprobs, 0)), logits.size());
    if (n == 0) return;
    order_.resize(logits.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(), [&](int32_t a, int32_t b) {
        const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
        return la > lb || (la == lb && a < b);
    });
    for (size_t i = 0; i < n; ++i) event_.top.push_back({order_[i], logprob(order_[i])});
}

const TokenEvent& ReplyStream::next(std::span<const float> logits) {
    std::span<const float> scores = logits;
    if (!options_.logit_bias.empty()) {
        biased_.assign(logits.begin(), logits.end());
        for (const auto& [token, bias] : options_.logit_bias)
            if (token >= 0 && static_cast<size_t>(token) < biased_.size()) biased_[static_cast<size_t>(token)] += bias;
        scores = biased_;
    }
    const int32_t id = sampler_.sample(scores, history_);
    history_.push_back(id);
    tokens_.push_back(id);
    event_.index = static_cast<uint32_t>(tokens_.size() - 1);
    event_.id = id;
    event_.end_of_turn = contains(options_.stop_ids, id);
    event_.text.clear();
    if (options_.top_logprobs >= 0) fill_logprobs(logits, id);
    const Tokenizer* tok = model_.tokenizer();
    if (event_.end_of_turn) {
        finish_ = FinishReason::Stop;
    } else if (tok != nullptr && !contains(options_.hidden_ids, id)) {
        event_.text = release(utf8_.push(tok->decode_token_bytes(id)));
    }
    text_ += event_.text;
    if (!done() && static_cast<int32_t>(tokens_.size()) >= options_.max_tokens) finish_ = FinishReason::Length;
    // At the end nothing stays held back: the last event shows the rest (nothing after a stop string).
    if (done()) event_.text += flush();
    return event_;
}

std::string ReplyStream::reply() const {
    const Tokenizer* tok = model_.tokenizer();
    if (tok == nullptr) return {};
    std::vector<int32_t> ids;
    for (int32_t id : tokens_)
        if (!contains(options_.stop_ids, id) && !contains(options_.hidden_ids, id)) ids.push_back(id);
    return tok->decode(ids, true);
}

// ---- the turn loop ----

Result<TurnResult> run_reply(const Model& model, Session& session, std::span<const int32_t> prompt,
                             std::span<const int32_t> history, Sampler& sampler, const TurnOptions& options,
                             TurnObserver* observer) {
    if (prompt.empty()) return error("no tokens to evaluate");
    TurnResult result;
    auto cancelled = [observer] { return observer != nullptr && observer->cancelled(); };
    auto eval = [&](std::span<const int32_t> tokens, bool generated) -> Result<std::span<const float>> {
        if (observer) observer->before_eval(session.position(), tokens, generated);
        auto logits = session.eval(tokens);
        if (logits && observer) observer->after_eval(logits.value());
        return logits;
    };

    auto t0 = std::chrono::steady_clock::now();
    Result<std::span<const float>> logits = error("no tokens to evaluate");
    const size_t step = options.prompt_step > 0 ? options.prompt_step : prompt.size();
    for (size_t i = 0; i < prompt.size(); i += step) {
        if (cancelled()) {
            result.finish = FinishReason::Cancelled;
            break;
        }
        logits = eval(prompt.subspan(i, std::min(step, prompt.size() - i)), false);
        if (!logits) return logits.status();
        result.prompt_evaluated += static_cast<uint32_t>(std::min(step, prompt.size() - i));
    }
    result.prompt_seconds = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    ReplyStream reply(model, sampler, options.reply, history);
    if (result.finish == FinishReason::Cancelled) reply.cancel();
    TokenFeeder feeder(session, options.drafter);
    if (observer != nullptr)
        feeder.set_eval_hook([](void* o, uint32_t position, std::span<const int32_t> rows) {
            static_cast<TurnObserver*>(o)->before_eval(position, rows, true);
        }, observer);
    std::vector<int32_t> fed(history.begin(), history.end());  // the drafter's view: everything before the next token
    while (!reply.done()) {
        if (cancelled()) {
            reply.cancel();
            break;
        }
        const TokenEvent& event = reply.next(logits.value());
        if (observer && !observer->on_token(event)) reply.cancel();
        if (reply.done() && !options.evaluate_last) break;
        fed.push_back(event.id);
        // Drafts only for tokens plain decoding would evaluate too: not past max_tokens' last (nor the context).
        const int32_t left = options.reply.max_tokens - static_cast<int32_t>(reply.tokens().size()) - 1;
        logits = feeder.feed(fed, reply.done() ? 0u : static_cast<uint32_t>(std::max(left, 0)));
        if (!logits) return logits.status();
        if (observer && !feeder.evaluated().empty()) observer->after_eval(logits.value());
        else if (observer) observer->after_checked_row(logits.value());
        ++result.decode_evaluated;
    }
    feeder.finish();
    result.speculation = feeder.stats();
    result.decode_seconds = seconds_since(t0);
    result.finish = reply.finish();
    result.tokens = reply.tokens();
    result.text = reply.text();
    result.reply = reply.reply();
    result.context_used = session.position();
    return result;
}

Result<TurnResult> ChatService::run(std::span<const int32_t> prompt, Sampler& sampler, const TurnOptions& options,
                                    TurnObserver* observer) {
    if (prompt.empty()) return error("no tokens to evaluate");
    COLIBRI_TRY(check_token_ids(model_, prompt));
    const size_t max_tokens = static_cast<size_t>(std::max(options.reply.max_tokens, 0));
    if (prompt.size() + max_tokens > session_.context())
        return error("conversation would exceed the context of " + std::to_string(session_.context()) + " tokens (" +
                     std::to_string(prompt.size()) + " in the prompt, up to " + std::to_string(max_tokens) + " in the reply)");

    // Keep the KV cache's common prefix and evaluate only what is new; at least one token must be fed to get
    // logits.
    size_t common = 0;
    while (reuse_prefix_ && common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) ++common;
    if (common == prompt.size()) --common;
    if (Status s = session_.truncate(static_cast<uint32_t>(common)); !s) {  // a hybrid's re-evaluation failed: reset
        cached_.clear();
        return s;
    }
    if (options.drafter && common < cached_.size()) options.drafter->reset();  // the session was cut back
    cached_.resize(common);
    if (observer) observer->on_started(static_cast<uint32_t>(common));

    auto result = run_reply(model_, session_, prompt.subspan(common), prompt, sampler, options, observer);
    if (!result) {
        // The session may hold part of the prompt: start the next turn from a known state.
        reset();
        return result;
    }
    result->reused = static_cast<uint32_t>(common);
    // The session holds the prompt and the generated tokens it evaluated (all but the last, unless evaluate_last).
    cached_.assign(prompt.begin(), prompt.end());
    cached_.insert(cached_.end(), result->tokens.begin(), result->tokens.end());
    cached_.resize(std::min<size_t>(cached_.size(), session_.position()));
    return result;
}

void ChatService::reset() {
    session_.reset();
    cached_.clear();
}

}  // namespace colibri
