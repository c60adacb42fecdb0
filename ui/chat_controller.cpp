#include "ui/chat_controller.h"

#include <QRandomGenerator>
#include <QRegularExpression>

namespace colibri::studio {

Result<std::vector<int32_t>> parse_token_ids(const QString& text) {
    std::vector<int32_t> ids;
    for (const QString& item : text.split(QRegularExpression(QStringLiteral("[,\\s]+")), Qt::SkipEmptyParts)) {
        bool ok = false;
        const qlonglong v = item.toLongLong(&ok);
        if (!ok || v < 0 || v > INT32_MAX) return error("'" + item.toStdString() + "' is not a token id");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) return error("no token ids given");
    return ids;
}

ChatController::ChatController(EngineWorker* worker, Conversation* conversation, QObject* parent)
    : QObject(parent), worker_(worker), conversation_(conversation) {
    connect(worker_, &EngineWorker::generationStarted, this, [this](int reused) { conversation_->begin_pass(reused); });
    connect(worker_, &EngineWorker::tokenGenerated, this, [this](int position, int token, const QString& text, bool end) {
        if (expecting_reply_) {
            const auto& m = conversation_->messages();
            if (m.isEmpty() || m.back().role != QLatin1String("assistant")) conversation_->begin_reply(position);
        }
        conversation_->add_generated(position, token, text, end);
    });
    connect(worker_, &EngineWorker::tokenEvaluated, this, [this](const TokenTrace& t) { conversation_->add_trace(t); });
    connect(worker_, &EngineWorker::generationFinished, this, [this](const GenerationStats& stats) {
        conversation_->finish_pass(stats.context_used);
        const auto& m = conversation_->messages();
        if (expecting_reply_ && !m.isEmpty() && m.back().role == QLatin1String("assistant")) {
            QString reply = stats.reply;
            if (uses_token_ids()) {  // the reply is its ids
                QStringList ids;
                const ConversationMessage& r = m.back();
                for (int p = r.first_token; p < r.first_token + r.token_count; ++p)
                    if (const ConversationToken* t = conversation_->token(p)) ids << QString::number(t->trace.token);
                reply = ids.join(QStringLiteral(", "));
            }
            conversation_->finish_reply(reply);
        }
        last_ = stats;
        set_generating(false);
        emit finished(stats);
    });
    connect(worker_, &EngineWorker::generationFailed, this, [this](const QString& error) {
        // A message the model never answered is taken back, so it can be edited and sent again.
        const auto& m = conversation_->messages();
        if (added_user_message_ && !m.isEmpty() && m.back().role == QLatin1String("user")) conversation_->remove_last_message();
        set_generating(false);
        emit failed(error);
    });
}

void ChatController::set_model(const ModelSummary& model) {
    model_ = model;
    has_model_ = true;
}

void ChatController::clear_model() {
    has_model_ = false;
    model_ = {};
}

void ChatController::set_generating(bool on) {
    if (generating_ == on) return;
    generating_ = on;
    emit generatingChanged(on);
}

void ChatController::start(GenerationRequest request, const ChatSettings& settings, bool reply) {
    request.sampling = settings.sampling;
    if (settings.random_seed) request.sampling.seed = QRandomGenerator::global()->generate64();
    if (reply) request.max_tokens = settings.max_tokens;
    expecting_reply_ = reply;
    set_generating(true);
    worker_->generate(request);
}

Status ChatController::send(const QString& message, const ChatSettings& settings) {
    if (!has_model_) return error("open a model first");
    if (generating_) return error("a reply is still being generated");
    const QString text = message.trimmed();
    if (text.isEmpty()) return error("nothing to send");
    GenerationRequest request;
    if (uses_token_ids()) {
        auto ids = parse_token_ids(text);
        if (!ids) return error("this model has no tokenizer, so messages are token ids: " + ids.message());
        request.token_ids = conversation_->token_ids();
        request.token_ids.insert(request.token_ids.end(), ids->begin(), ids->end());
    }
    conversation_->add_user_message(text);
    if (!uses_token_ids()) request.messages = conversation_->request_messages();
    added_user_message_ = true;
    start(std::move(request), settings, true);
    return Status::ok();
}

Status ChatController::regenerate(const ChatSettings& settings) {
    if (!has_model_) return error("open a model first");
    if (generating_) return error("a reply is still being generated");
    const auto& m = conversation_->messages();
    if (m.isEmpty()) return error("there is no message to answer again");
    int reply_start = -1;
    if (m.back().role == QLatin1String("assistant")) {
        reply_start = m.back().first_token;
        conversation_->remove_last_message();
    }
    if (m.isEmpty() || m.back().role != QLatin1String("user")) return error("there is no message to answer again");
    GenerationRequest request;
    if (uses_token_ids()) {
        request.token_ids = conversation_->token_ids();
        if (reply_start >= 0 && reply_start <= static_cast<int>(request.token_ids.size())) request.token_ids.resize(static_cast<size_t>(reply_start));
    } else {
        request.messages = conversation_->request_messages();
    }
    added_user_message_ = false;
    start(std::move(request), settings, true);
    return Status::ok();
}

Status ChatController::replay() {
    if (!has_model_) return error("open a model first");
    if (generating_) return error("a reply is still being generated");
    GenerationRequest request;
    request.token_ids = conversation_->token_ids();
    if (request.token_ids.empty()) return error("the conversation has no tokens to evaluate");
    request.max_tokens = 0;
    added_user_message_ = false;
    start(std::move(request), ChatSettings{}, false);
    return Status::ok();
}

void ChatController::stop() { worker_->requestStop(); }

void ChatController::new_conversation() {
    if (generating_) worker_->requestStop();
    conversation_->clear();
    worker_->resetConversation();
}

}  // namespace colibri::studio
