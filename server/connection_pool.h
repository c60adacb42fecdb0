// The HTTP server's connection threads, started before the server says it listens. httplib's own pool starts
// them inside listen(): under a process or memory limit the server printed "listening" and then died or served
// nobody; here a refused thread is an error at startup (the ones started are stopped again).
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/status.h"

namespace colibri::server {

class ConnectionPool final : public httplib::TaskQueue {
public:
    static Result<std::unique_ptr<ConnectionPool>> start(unsigned threads);
    ~ConnectionPool() override;

    void enqueue(std::function<void()> task) override;
    void shutdown() override;  // runs the queued tasks, then joins the threads

private:
    ConnectionPool() = default;
    void work();

    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace colibri::server
