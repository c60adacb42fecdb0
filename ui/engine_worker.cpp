#include "ui/engine_worker.h"

#include <algorithm>

#include "engine/chat_service.h"
#include "engine/model.h"
#include "engine/perf_counters.h"
#include "engine/session.h"
#include "engine/thread_pool.h"
#include "engine/utf8_stream.h"
#include "ui/trace_collector.h"

namespace colibri::studio {

namespace {

void register_metatypes() {
    qRegisterMetaType<TokenTrace>();
    qRegisterMetaType<CounterSet>();
    qRegisterMetaType<ModelSummary>();
    qRegisterMetaType<GenerationStats>();
}

}  // namespace

CounterSet counter_set(const PerfCounters& c) {
    CounterSet set;
    for (const CounterEvent& e : c.events()) {
        set.names << QString::fromStdString(e.name);
        if (e.hardware) set.hardware_names << QString::fromStdString(e.name);
    }
    set.hardware_status = QString::fromStdString(c.hardware_status());
    set.software_status = QString::fromStdString(c.software_status());
    return set;
}

EngineWorker::EngineWorker() { register_metatypes(); }

EngineWorker::~EngineWorker() { do_unload(); }

void EngineWorker::load(const QString& path, const LoadOptions& options) {
    QMetaObject::invokeMethod(this, [this, path, options] { do_load(path, options); }, Qt::QueuedConnection);
}

void EngineWorker::unload() {
    QMetaObject::invokeMethod(this, [this] {
        do_unload();
        emit unloaded();
    }, Qt::QueuedConnection);
}

void EngineWorker::generate(const GenerationRequest& request) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, request, id] { do_generate(request, id); }, Qt::QueuedConnection);
}

void EngineWorker::resetConversation() {
    QMetaObject::invokeMethod(this, [this] {
        if (chat_) chat_->reset();
    }, Qt::QueuedConnection);
}

void EngineWorker::setCounting(bool on) {
    QMetaObject::invokeMethod(this, [this, on] {
        counting_ = on;
        if (collector_) collector_->set_counting(on);
    }, Qt::QueuedConnection);
}

void EngineWorker::requestStop() { cancelled_.store(posted_.load()); }

void EngineWorker::do_unload() {
    // The session refers to the model and the pool; the pool's threads carry the inherited counters.
    chat_.reset();
    session_.reset();
    collector_.reset();
    pool_.reset();
    model_.reset();
    counters_.reset();
}

void EngineWorker::do_load(const QString& path, const LoadOptions& options) {
    do_unload();
    auto model = Model::load(path.toStdString());
    if (!model) {
        emit loadFailed(path, QString::fromStdString(model.message()));
        return;
    }
    const uint32_t max_position = model.value()->hparams().max_position;
    if (options.context > max_position) {
        emit loadFailed(path, tr("context %1 exceeds the model's maximum of %2").arg(options.context).arg(max_position));
        return;
    }
    model_ = std::move(model.value());
    // Counters first: the pool's threads, started next, inherit them, so per-layer counts include their work.
    counters_ = PerfCounters::open_default();
    pool_ = std::make_unique<ThreadPool>(options.threads);
    session_ = std::make_unique<Session>(*model_, *pool_, options.context);
    collector_ = std::make_unique<TraceCollector>(counters_.get());
    collector_->set_counting(counting_);
    session_->set_observer(collector_.get());
    chat_ = std::make_unique<ChatService>(*model_, *session_);

    ModelSummary summary = summarize(*model_, path);
    summary.context = static_cast<int>(session_->context());
    summary.threads = static_cast<int>(pool_->size());
    emit loaded(summary, counter_set(*counters_));
}

QString EngineWorker::token_text(int32_t token, std::string& pending) const {
    const Tokenizer* tok = model_->tokenizer();
    if (tok == nullptr) return QStringLiteral("[%1] ").arg(token);
    // A character split across tokens is shown with the token that completes it.
    Utf8Stream stream;
    stream.push(pending);
    const std::string ready = stream.push(tok->decode_token_bytes(token));
    pending = stream.flush();
    return QString::fromUtf8(ready.data(), static_cast<qsizetype>(ready.size()));
}

// The chat service's turn seen from the Studio: every evaluated position becomes a TokenTrace, every sampled
// token a tokenGenerated signal, and requestStop() cancels between tokens.
class EngineWorker::TurnSignals final : public TurnObserver {
public:
    TurnSignals(EngineWorker& worker, uint64_t id) : w_(worker), id_(id) {}
    void on_started(uint32_t reused) override { emit w_.generationStarted(static_cast<int>(reused)); }
    void before_eval(uint32_t position, std::span<const int32_t> tokens, bool generated) override {
        // One token per step (prompt_step = 1): each position gets its own trace.
        const QString text = generated ? generated_text_ : w_.token_text(tokens[0], pending_);
        w_.collector_->begin(static_cast<int>(position), tokens[0], text, generated);
    }
    void after_eval(std::span<const float>) override { emit w_.tokenEvaluated(w_.collector_->take()); }
    bool on_token(const TokenEvent& e) override {
        const Tokenizer* tok = w_.model_->tokenizer();
        if (tok == nullptr) generated_text_ = QStringLiteral("[%1] ").arg(e.id);
        else if (e.end_of_turn) generated_text_ = QString::fromStdString(tok->decode_token_bytes(e.id));
        else generated_text_ = QString::fromUtf8(e.text.data(), static_cast<qsizetype>(e.text.size()));
        emit w_.tokenGenerated(static_cast<int>(w_.session_->position()), e.id, generated_text_, e.end_of_turn);
        return true;
    }
    bool cancelled() override { return id_ <= w_.cancelled_.load(); }

private:
    EngineWorker& w_;
    uint64_t id_;
    std::string pending_;  // the prompt's unfinished character
    QString generated_text_;
};

void EngineWorker::do_generate(const GenerationRequest& request, uint64_t id) {
    if (!session_) {
        emit generationFailed(tr("no model is loaded"));
        return;
    }
    std::vector<int32_t> ids = request.token_ids;
    if (ids.empty()) {
        std::vector<ChatMessage> messages;
        for (const ChatTurn& t : request.messages) messages.push_back({t.role.toStdString(), t.content.toStdString()});
        auto rendered = chat_prompt_ids(*model_, messages);
        if (!rendered) {
            emit generationFailed(QString::fromStdString(rendered.message()));
            return;
        }
        ids = std::move(rendered.value());
    }
    TurnOptions options;
    options.reply.max_tokens = std::max(0, request.max_tokens);
    // With explicit ids the caller decides when to stop, as `colibri generate --tokens` does.
    if (request.token_ids.empty()) options.reply.stop_ids = default_stop_ids(*model_);
    options.prompt_step = 1;
    // Every generated token is evaluated, the last one too, so each has its routing and the cache holds the
    // whole reply for the next turn.
    options.evaluate_last = true;
    Sampler sampler(request.sampling);
    TurnSignals observer(*this, id);
    auto turn = chat_->run(ids, sampler, options, &observer);
    if (!turn) {
        QString message = QString::fromStdString(turn.message());
        if (message.startsWith(QLatin1String("conversation would exceed"))) message = tr("the %1; start a new one").arg(message);
        emit generationFailed(message);
        return;
    }
    GenerationStats stats;
    stats.reused_tokens = static_cast<int>(turn->reused);
    stats.prompt_tokens = static_cast<int>(turn->prompt_evaluated);
    stats.generated = static_cast<int>(turn->tokens.size());
    stats.prompt_seconds = turn->prompt_seconds;
    stats.decode_seconds = turn->decode_seconds;
    stats.context_used = static_cast<int>(turn->context_used);
    stats.context_size = static_cast<int>(session_->context());
    stats.stopped = turn->finish == FinishReason::Cancelled;
    stats.reply = QString::fromStdString(turn->reply);
    emit generationFinished(stats);
}

}  // namespace colibri::studio
