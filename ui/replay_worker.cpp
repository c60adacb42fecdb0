#include "ui/replay_worker.h"

#include <algorithm>
#include <climits>

#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "engine/core/session.h"
#include "engine/text/utf8.h"
#include "ui/trace_collector.h"

namespace colibri::studio {

ReplayWorker::ReplayWorker() { qRegisterMetaType<ReplayResult>(); }

void ReplayWorker::replay(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, model_path, ids, threads, id] { do_replay(model_path, ids, threads, id); }, Qt::QueuedConnection);
}

void ReplayWorker::do_replay(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads, uint64_t id) {
    auto cancelled = [this, id] { return id <= cancelled_.load(); };
    ReplayResult result;
    result.model = model_path;
    if (ids.empty()) {
        result.error = tr("there are no tokens to evaluate");
        emit finished(result);
        return;
    }
    // Opened as every front end opens a model (engine/core/open_model.h): one context check, one wording. The
    // session holds the whole conversation; the ids must be the other model's too.
    OpenOptions open;
    open.path = model_path.toStdString();
    open.threads = threads;
    open.context = static_cast<uint32_t>(std::min<size_t>(ids.size(), UINT32_MAX));
    auto opened = open_model(open);
    if (!opened) {
        result.error = QString::fromStdString(opened.message());
        emit finished(result);
        return;
    }
    if (Status s = check_token_ids(*opened->model, ids); !s) {
        result.error = tr("%1: the two models do not share a tokenizer").arg(QString::fromStdString(s.message()));
        emit finished(result);
        return;
    }
    Session& session = *opened->session;
    TraceCollector collector(nullptr);
    session.set_observer(&collector);
    const Tokenizer* tok = opened->model->tokenizer();
    std::string pending;
    const size_t chunk = session.options().chunk;
    for (size_t i = 0; i < ids.size(); i += chunk) {
        if (cancelled()) {
            result.cancelled = true;
            break;
        }
        const size_t n = std::min(chunk, ids.size() - i);
        std::vector<int32_t> part(ids.begin() + static_cast<std::ptrdiff_t>(i), ids.begin() + static_cast<std::ptrdiff_t>(i + n));
        std::vector<QString> texts;
        for (int32_t t : part) {
            if (tok == nullptr) {
                texts.push_back(QStringLiteral("[%1] ").arg(t));
                continue;
            }
            Utf8Stream stream;
            stream.push(pending);
            const std::string ready = stream.push(tok->decode_token_bytes(t));
            pending = stream.flush();
            texts.push_back(QString::fromUtf8(ready.data(), static_cast<qsizetype>(ready.size())));
        }
        collector.begin(static_cast<int>(i), part, texts, false);
        auto logits = session.eval(std::span<const int32_t>(part));
        if (!logits) {
            result.error = QString::fromStdString(logits.message());
            break;
        }
        for (TokenTrace& t : collector.take()) {
            t.layers.clear();  // routing is what a comparison needs
            result.traces.push_back(std::move(t));
        }
        emit progress(static_cast<int>(i + n), static_cast<int>(ids.size()));
    }
    emit finished(result);
}

Replayer::Replayer(QObject* parent)
    : QObject(parent), worker_(new ReplayWorker),
      thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("replay"), [w = worker_] { w->cancel(); })) {
    connect(worker_, &ReplayWorker::progress, this, &Replayer::progress);
    connect(worker_, &ReplayWorker::finished, this, [this](const ReplayResult& r) {
        running_ = false;
        emit finished(r);
    });
}

Replayer::~Replayer() = default;

void Replayer::start(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads) {
    running_ = true;
    worker_->replay(model_path, ids, threads);
}

void Replayer::cancel() {
    if (running_) worker_->cancel();
}

}  // namespace colibri::studio
