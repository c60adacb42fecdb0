// ReplayWorker: token ids through a model of its own on a thread of its own, for their routing: the other side
// of a routing comparison (the same conversation through a second model, f16 against q4_k say). It never
// touches the chat's EngineWorker; each request loads its model, evaluates in chunks (cancellable between
// them) and lets the model go.
#pragma once
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <vector>

#include "ui/data/replay_result.h"
#include "ui/worker_thread.h"

namespace colibri::studio {

class ReplayWorker : public QObject {
    Q_OBJECT
public:
    ReplayWorker();
    // Posted to the worker's thread.
    void replay(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads = 0);
    void cancel() { cancelled_.store(posted_.load()); }  // thread-safe

signals:
    void progress(int done, int total);
    void finished(const colibri::studio::ReplayResult& result);

private:
    void do_replay(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads, uint64_t id);
    std::atomic<uint64_t> posted_{0}, cancelled_{0};
};

// Owns a ReplayWorker on its own thread.
class Replayer : public QObject {
    Q_OBJECT
public:
    explicit Replayer(QObject* parent = nullptr);
    ~Replayer() override;
    void start(const QString& model_path, const std::vector<int32_t>& ids, unsigned threads = 0);
    void cancel();
    bool running() const { return running_; }

signals:
    void progress(int done, int total);
    void finished(const colibri::studio::ReplayResult& result);

private:
    ReplayWorker* worker_;
    std::unique_ptr<WorkerThread> thread_;
    bool running_ = false;
};

}  // namespace colibri::studio

