// The chat flow between the views and the EngineWorker: a message becomes a request (the whole conversation,
// which the worker answers from its cached prefix), the worker's stream becomes the Conversation, and
// stop, regenerate, new conversation and replay (after loading a saved one) are one call each.
// Models without a tokenizer are driven by token ids: a message is "1, 2, 3" and continues the sequence.
#pragma once
#include <QElapsedTimer>
#include <QObject>

#include "ui/conversation.h"
#include "ui/engine_worker.h"

namespace colibri::studio {

// The sampling presets of the settings panel: the model's own defaults (its generation_config.json), or one of
// ours. Custom is whatever the user set by hand.
enum class SamplingPreset { ModelDefault, Greedy, Balanced, Creative, Custom };
// The sampling a preset stands for; ModelDefault is `model_default` (ModelSummary::default_sampling).
SamplerConfig preset_sampling(SamplingPreset preset, const SamplerConfig& model_default);

struct ChatSettings {
    SamplerConfig sampling;
    bool random_seed = true;  // a fresh seed per request (regenerate gives another reply)
    int max_tokens = 256;
    SpeculateMode speculate = SpeculateMode::Off;  // drafts checked in one evaluation: the same reply, fewer passes
};

class ChatController : public QObject {
    Q_OBJECT
public:
    ChatController(EngineWorker* worker, Conversation* conversation, QObject* parent = nullptr);

    void set_model(const ModelSummary& model);
    void clear_model();
    bool has_model() const { return has_model_; }
    bool uses_token_ids() const { return has_model_ && !model_.has_tokenizer; }
    const ModelSummary& model() const { return model_; }
    bool generating() const { return generating_; }
    // A reply stopped by new_conversation() is still winding down: nothing it sends is kept.
    bool discarding() const { return discarding_; }
    const GenerationStats& last_stats() const { return last_; }

    // A model that failed verification: send and regenerate refuse (with reason) until confirm_untrusted().
    void set_untrusted(const QString& reason);
    void confirm_untrusted() { untrusted_confirmed_ = true; }
    bool blocked() const { return !untrusted_.isEmpty() && !untrusted_confirmed_; }
    const QString& untrusted_reason() const { return untrusted_; }

    // Errors (nothing sent) are returned; failures of the generation itself arrive as failed(), with the
    // message that was sent so that it can be offered again.
    Status send(const QString& message, const ChatSettings& settings);
    Status regenerate(const ChatSettings& settings);
    // Evaluates the conversation's tokens (a loaded conversation) to rebuild traces and the KV cache.
    Status replay();
    void stop();
    void new_conversation();

    // While a reply streams: generated tokens, their rate since the first one, and the context in use.
    struct Progress {
        int generated = 0;
        double tokens_per_second = 0.0;
        int context_used = 0;
        int context_size = 0;
    };
    const Progress& progress() const { return progress_; }

signals:
    void generatingChanged(bool generating);
    void finished(const colibri::studio::GenerationStats& stats);
    void failed(const QString& error);
    void sendFailed(const QString& message);  // the user message taken back after a failed generation
    void progressed();                        // progress() changed

private:
    void start(GenerationRequest request, const ChatSettings& settings, bool reply);
    void set_generating(bool on);

    EngineWorker* worker_;
    Conversation* conversation_;
    ModelSummary model_;
    bool has_model_ = false;
    bool generating_ = false;
    bool expecting_reply_ = false;  // the running request adds an assistant message
    bool added_user_message_ = false;
    GenerationStats last_;
    Progress progress_;
    qint64 first_token_ms_ = -1;  // when the first token of the running reply arrived (clock_)
    QElapsedTimer clock_;
    QString untrusted_;
    bool untrusted_confirmed_ = false;
    bool discarding_ = false;  // signals of a reply stopped by new_conversation() are dropped until it ends
};

// "1, 2 3" → ids; an error names the first item that is not a token id.
Result<std::vector<int32_t>> parse_token_ids(const QString& text);

}  // namespace colibri::studio
