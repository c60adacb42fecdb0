#include "ui/engine_worker.h"

#include <QElapsedTimer>
#include <algorithm>

#include "ui/chat_prompt.h"
#include "engine/generate.h"
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
        if (session_) session_->reset();
        cached_.clear();
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
    session_.reset();
    collector_.reset();
    pool_.reset();
    model_.reset();
    counters_.reset();
    cached_.clear();
    stop_ids_.clear();
    logits_ = {};
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
    stop_ids_ = default_stop_ids(*model_);

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

Status EngineWorker::eval_traced(int32_t token, const QString& text, bool generated) {
    collector_->begin(static_cast<int>(session_->position()), token, text, generated);
    auto logits = session_->eval(token);
    if (!logits) return logits.status();
    logits_ = logits.value();
    cached_.push_back(token);
    emit tokenEvaluated(collector_->take());
    return Status::ok();
}

void EngineWorker::do_generate(const GenerationRequest& request, uint64_t id) {
    auto cancelled = [this, id] { return id <= cancelled_.load(); };
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
    for (int32_t t : ids)
        if (t < 0 || static_cast<uint32_t>(t) >= model_->hparams().vocab_size) {
            emit generationFailed(tr("token id %1 out of range (vocabulary %2)").arg(t).arg(model_->hparams().vocab_size));
            return;
        }
    const int max_tokens = std::max(0, request.max_tokens);
    if (ids.size() + static_cast<size_t>(max_tokens) > session_->context()) {
        emit generationFailed(tr("the conversation would exceed the context of %1 tokens; start a new one").arg(session_->context()));
        return;
    }

    // Reuse the KV cache for the common prefix, as `colibri chat` does; at least one token must be fed.
    size_t common = 0;
    while (common < cached_.size() && common < ids.size() && cached_[common] == ids[common]) ++common;
    if (common == ids.size()) --common;
    session_->truncate(static_cast<uint32_t>(common));
    cached_.resize(common);

    GenerationStats stats;
    stats.reused_tokens = static_cast<int>(common);
    stats.context_size = static_cast<int>(session_->context());
    emit generationStarted(static_cast<int>(common));
    auto fail = [this](const Status& s) { emit generationFailed(QString::fromStdString(s.message())); };

    QElapsedTimer clock;
    clock.start();
    std::string pending;
    for (size_t i = common; i < ids.size(); ++i) {
        if (cancelled()) {
            stats.stopped = true;
            break;
        }
        if (Status s = eval_traced(ids[i], token_text(ids[i], pending), false); !s) return fail(s);
        ++stats.prompt_tokens;
    }
    stats.prompt_seconds = static_cast<double>(clock.nsecsElapsed()) * 1e-9;

    // With explicit ids the caller decides when to stop, as `colibri generate --tokens` does.
    const bool use_stop_ids = request.token_ids.empty();
    Sampler sampler(request.sampling);
    std::vector<int32_t> history(ids.begin() + static_cast<std::ptrdiff_t>(common), ids.end());
    std::vector<int32_t> reply;
    clock.restart();
    pending.clear();
    while (!stats.stopped && stats.generated < max_tokens) {
        if (cancelled()) {
            stats.stopped = true;
            break;
        }
        const int32_t next = sampler.sample(logits_, history);
        history.push_back(next);
        const bool end = use_stop_ids && std::find(stop_ids_.begin(), stop_ids_.end(), next) != stop_ids_.end();
        const QString text = token_text(next, pending);
        emit tokenGenerated(static_cast<int>(session_->position()), next, text, end);
        ++stats.generated;
        if (!end) reply.push_back(next);
        // Every generated token is evaluated, the last one too, so each has its routing and the cache
        // holds the whole reply for the next turn.
        if (Status s = eval_traced(next, text, true); !s) return fail(s);
        if (end) break;
    }
    stats.decode_seconds = static_cast<double>(clock.nsecsElapsed()) * 1e-9;
    stats.context_used = static_cast<int>(session_->position());
    if (const Tokenizer* tok = model_->tokenizer()) stats.reply = QString::fromStdString(tok->decode(reply, true));
    emit generationFinished(stats);
}

}  // namespace colibri::studio
