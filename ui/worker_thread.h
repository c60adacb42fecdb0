// A worker QObject on its own QThread for the owner's lifetime: the EngineWorker and the FileWorkers.
#pragma once
#include <QObject>
#include <QString>
#include <QThread>
#include <functional>

namespace colibri::studio {

// Owns a worker QObject on its own thread for its lifetime. The destructor calls interrupt (to end work in
// progress, which holds the thread), stops the thread and deletes the worker.
class WorkerThread {
public:
    WorkerThread(QObject* worker, const QString& name, std::function<void()> interrupt = nullptr);
    ~WorkerThread();
    WorkerThread(const WorkerThread&) = delete;
    WorkerThread& operator=(const WorkerThread&) = delete;
    QThread* thread() { return &thread_; }

private:
    QThread thread_;
    QObject* worker_;
    std::function<void()> interrupt_;
};

}  // namespace colibri::studio
