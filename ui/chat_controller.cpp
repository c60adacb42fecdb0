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
    clock_.start();
    connect(worker_, &EngineWorker::generationStarted, this, [this](int reused) {
        if (!discarding_) conversation_->begin_pass(reused);
    });
    connect(worker_, &EngineWorker::tokenGenerated, this, [this](int position, int token, const QString& text, bool end) {
        if (discarding_) return;
        if (expecting_reply_) {
            const auto& m = conversation_->messages();
            // A model that failed verification and was chatted with anyway marks every reply it writes.
            if (m.isEmpty() || m.back().role != QLatin1String("assistant")) conversation_->begin_reply(position, !untrusted_.isEmpty());
        }
        conversation_->add_generated(position, token, text, end);
        // The rate over the tokens after the first: the first one waited for the prompt.
        const qint64 now = clock_.elapsed();
        if (first_token_ms_ < 0) first_token_ms_ = now;
        ++progress_.generated;
        progress_.tokens_per_second = now > first_token_ms_ ? (progress_.generated - 1) * 1000.0 / static_cast<double>(now - first_token_ms_) : 0.0;
        progress_.context_used = position + 1;
        emit progressed();
    });
    connect(worker_, &EngineWorker::tokenEvaluated, this, [this](const TokenTrace& t) {
        if (!discarding_) conversation_->add_trace(t);
    });
    connect(worker_, &EngineWorker::generationFinished, this, [this](const GenerationStats& stats) {
        if (discarding_) {  // a reply stopped by New conversation: nothing of it is kept
            discarding_ = false;
            set_generating(false);
            emit progressed();
            return;
        }
        // Not generating any more before the reply is finished: its header shows its timing, not "generating".
        set_generating(false);
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
            ReplyTiming timing;
            timing.prompt_tokens = stats.prompt_tokens;
            timing.generated = stats.generated;
            timing.prompt_seconds = stats.prompt_seconds;
            timing.decode_seconds = stats.decode_seconds;
            timing.decode_evaluated = stats.decode_evaluated;
            timing.stopped = stats.stopped;
            timing.kernel = stats.kernel;
            conversation_->finish_reply(reply, timing);
        }
        last_ = stats;
        if (stats.context_used >= 0) progress_.context_used = stats.context_used;
        progress_.context_size = stats.context_size;
        emit finished(stats);
    });
    connect(worker_, &EngineWorker::generationFailed, this, [this](const QString& error) {
        if (discarding_) {
            discarding_ = false;
            set_generating(false);
            emit progressed();
            return;
        }
        // A message the model never answered is taken back, so it can be edited and sent again.
        const auto& m = conversation_->messages();
        QString taken_back;
        if (added_user_message_ && !m.isEmpty() && m.back().role == QLatin1String("user")) {
            taken_back = m.back().content;
            conversation_->remove_last_message();
        }
        set_generating(false);
        emit failed(error);
        if (!taken_back.isEmpty()) emit sendFailed(taken_back);
    });
}

void ChatController::set_model(const ModelSummary& model) {
    model_ = model;
    has_model_ = true;
    untrusted_.clear();
    untrusted_confirmed_ = false;
    progress_ = {};
    progress_.context_size = model.context;
}

void ChatController::clear_model() {
    has_model_ = false;
    model_ = {};
    untrusted_.clear();
    untrusted_confirmed_ = false;
    progress_ = {};
}

void ChatController::set_untrusted(const QString& reason) {
    untrusted_ = reason;
    untrusted_confirmed_ = false;
}

void ChatController::set_generating(bool on) {
    if (generating_ == on) return;
    generating_ = on;
    emit generatingChanged(on);
}

void ChatController::start(GenerationRequest request, const ChatSettings& settings, bool reply) {
    request.sampling = settings.sampling;
    request.speculate = settings.speculate;
    if (settings.random_seed) request.sampling.seed = QRandomGenerator::global()->generate64();
    if (reply) request.max_tokens = settings.max_tokens;
    expecting_reply_ = reply;
    progress_.generated = 0;
    progress_.tokens_per_second = 0.0;
    first_token_ms_ = -1;
    set_generating(true);
    worker_->generate(request);
}

namespace {
std::string blocked_message(const QString& reason) {
    return "this model failed verification (" + reason.toStdString() + "); choose \"Chat anyway\" in the banner to use it regardless";
}
}  // namespace

Status ChatController::send(const QString& message, const ChatSettings& settings) {
    if (!has_model_) return error("open a model first");
    if (blocked()) return error(blocked_message(untrusted_));
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
    if (blocked()) return error(blocked_message(untrusted_));
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
    if (generating_) {
        worker_->requestStop();
        discarding_ = true;  // what is still on its way from the stopped reply belongs to no conversation
    }
    conversation_->clear();
    worker_->resetConversation();
    last_ = {};
    progress_ = {};
    progress_.context_size = model_.context;
    emit progressed();
}

SamplerConfig preset_sampling(SamplingPreset preset, const SamplerConfig& model_default) {
    SamplerConfig s;
    switch (preset) {
    case SamplingPreset::ModelDefault:
    case SamplingPreset::Custom: return model_default;
    case SamplingPreset::Greedy: s.greedy = true; break;
    case SamplingPreset::Balanced:  // llama.cpp's and Colibri's everyday defaults
        break;
    case SamplingPreset::Creative:  // more varied: hotter, a wider nucleus, no top-k cut
        s.temperature = 1.0f;
        s.top_k = 0;
        s.top_p = 0.98f;
        s.min_p = 0.02f;
        break;
    }
    return s;
}

}  // namespace colibri::studio
