// Runs the kernel auto-tuner (kernels/tuner.h) on its own thread for the kernels view: progress after each
// measurement, cancel between measurements (the measurements finished by then come with the cancellation),
// and the finished report in the same form as an imported one (tune_report.h). A complete run saves its choice to the tune cache, as `colibri tune` does, so the engine
// uses it from the next start.
#pragma once
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>

#include "kernels/tuner.h"
#include "ui/data/tune_report.h"

namespace colibri::studio {

class WorkerThread;

// The tuner on the worker thread. Callers use TuneRunner.
class TuneWorker : public QObject {
    Q_OBJECT
public:
    // Posted to the worker's thread. cache_path empty: the choice is not saved.
    void run(const kernels::TuneOptions& options, const QString& cache_path);
    // Thread-safe: the running tune (and any posted) stops after the measurement in progress.
    void cancel() { cancelled_.store(posted_.load()); }

signals:
    void progress(int done, int total, const QString& measured);
    void finished(const colibri::studio::TuneReport& report, const QString& cache_note);
    // partial: what was measured before the cancel (possibly no results).
    void cancelled(const colibri::studio::TuneReport& partial);

private:
    void do_run(const kernels::TuneOptions& options, const QString& cache_path, uint64_t id);
    std::atomic<uint64_t> posted_{0}, cancelled_{0};
};

class TuneRunner : public QObject {
    Q_OBJECT
public:
    explicit TuneRunner(QObject* parent = nullptr);
    ~TuneRunner() override;

    // What start() runs; by default the full tune (every variant, the bench model's shapes).
    void set_options(const kernels::TuneOptions& options) { options_ = options; }
    // Where a complete run saves its choice (default: kernels::tune_cache_path()); empty saves nothing.
    void set_cache_path(const QString& path) { cache_path_ = path; }
    void start();
    void cancel();
    bool running() const { return running_; }

signals:
    void progress(int done, int total, const QString& measured);
    void finished(const colibri::studio::TuneReport& report, const QString& cache_note);
    void cancelled(const colibri::studio::TuneReport& partial);

private:
    TuneWorker* worker_;
    std::unique_ptr<WorkerThread> thread_;
    kernels::TuneOptions options_;
    QString cache_path_;
    bool running_ = false;
};

}  // namespace colibri::studio
