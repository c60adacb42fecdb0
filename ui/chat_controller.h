// The chat flow between the views and the EngineWorker: a message becomes a request (the whole conversation,
// which the worker answers from its cached prefix), the worker's stream becomes the Conversation, and
// stop, regenerate, new conversation and replay (after loading a saved one) are one call each.
// Models without a tokenizer are driven by token ids: a message is "1, 2, 3" and continues the sequence.
#pragma once
#include <QObject>

#include "ui/conversation.h"
#include "ui/engine_worker.h"

namespace colibri::studio {

struct ChatSettings {
    SamplerConfig sampling;
    bool random_seed = true;  // a fresh seed per request (regenerate gives another reply)
    int max_tokens = 256;
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
    const GenerationStats& last_stats() const { return last_; }

    // Errors (nothing sent) are returned; failures of the generation itself arrive as failed().
    Status send(const QString& message, const ChatSettings& settings);
    Status regenerate(const ChatSettings& settings);
    // Evaluates the conversation's tokens (a loaded conversation) to rebuild traces and the KV cache.
    Status replay();
    void stop();
    void new_conversation();

signals:
    void generatingChanged(bool generating);
    void finished(const colibri::studio::GenerationStats& stats);
    void failed(const QString& error);

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
};

// "1, 2 3" → ids; an error names the first item that is not a token id.
Result<std::vector<int32_t>> parse_token_ids(const QString& text);

}  // namespace colibri::studio
