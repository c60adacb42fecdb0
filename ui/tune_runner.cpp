#include "ui/tune_runner.h"

#include "tools/tune_cache.h"
#include "ui/worker_thread.h"

namespace colibri::studio {

void TuneWorker::run(const kernels::TuneOptions& options, const QString& cache_path) {
    const uint64_t id = ++posted_;
    QMetaObject::invokeMethod(this, [this, options, cache_path, id] { do_run(options, cache_path, id); }, Qt::QueuedConnection);
}

void TuneWorker::do_run(const kernels::TuneOptions& options, const QString& cache_path, uint64_t id) {
    auto stopped = [this, id] { return id <= cancelled_.load(); };
    if (stopped()) {
        emit cancelled(TuneReport{});
        return;
    }
    const kernels::TuneReport report = kernels::run_tuner(options, [&](size_t done, size_t total, const kernels::TuneResult& r) {
        emit progress(static_cast<int>(done), static_cast<int>(total),
                      QStringLiteral("%1 %2 %3×%4 %5").arg(QLatin1String(kernels::op_name(r.op)), QLatin1String(kernels::weight_type_label(r.type)))
                          .arg(r.rows).arg(r.cols).arg(QLatin1String(kernels::variant_display_name(r.variant))));
        return !stopped();
    });
    if (report.cancelled) {
        // The finished measurements stay: a long tune cancelled near its end still shows what it measured.
        emit cancelled(report.results.empty() ? TuneReport{} : studio_report(report, tr("this machine, cancelled")));
        return;
    }
    QString note;
    if (!cache_path.isEmpty()) {
        const Status saved = tools::save_tune_cache(report, cache_path.toStdString());
        note = saved ? tr("choice saved to %1, used from the next start").arg(cache_path)
                     : tr("the choice was not saved: %1").arg(QString::fromStdString(saved.message()));
    }
    emit finished(studio_report(report, tr("this machine")), note);
}

TuneRunner::TuneRunner(QObject* parent)
    : QObject(parent), worker_(new TuneWorker),
      thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("tuner"), [w = worker_] { w->cancel(); })),
      cache_path_(QString::fromStdString(kernels::tune_cache_path())) {
    qRegisterMetaType<TuneReport>();
    connect(worker_, &TuneWorker::progress, this, &TuneRunner::progress);
    connect(worker_, &TuneWorker::finished, this, [this](const TuneReport& report, const QString& note) {
        running_ = false;
        emit finished(report, note);
    });
    connect(worker_, &TuneWorker::cancelled, this, [this](const TuneReport& partial) {
        running_ = false;
        emit cancelled(partial);
    });
}

// Stops a tune in progress (after its current measurement) before the thread goes.
TuneRunner::~TuneRunner() = default;

void TuneRunner::start() {
    if (running_) return;
    running_ = true;
    worker_->run(options_, cache_path_);
}

void TuneRunner::cancel() {
    if (running_) worker_->cancel();
}

}  // namespace colibri::studio
