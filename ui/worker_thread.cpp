#include "ui/worker_thread.h"

namespace colibri::studio {

WorkerThread::WorkerThread(QObject* worker, const QString& name, std::function<void()> interrupt)
    : worker_(worker), interrupt_(std::move(interrupt)) {
    thread_.setObjectName(name);
    worker_->moveToThread(&thread_);
    QObject::connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    thread_.start();
}

WorkerThread::~WorkerThread() {
    if (interrupt_) interrupt_();
    thread_.quit();
    thread_.wait();
}

}  // namespace colibri::studio
