#include "server/connection_pool.h"

#include <system_error>

#include "engine/thread_pool.h"

namespace colibri::server {

Result<std::unique_ptr<ConnectionPool>> ConnectionPool::start(unsigned threads) {
    std::unique_ptr<ConnectionPool> pool(new ConnectionPool);
    try {
        pool->threads_.reserve(threads);
        for (unsigned i = 0; i < threads; ++i) pool->threads_.emplace_back([p = pool.get()] { p->work(); });
    } catch (const std::system_error& e) {
        return error(thread_start_failure(std::to_string(threads) + " connection threads", e));  // the destructor joins
    }
    return pool;
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> task) {
    {
        std::lock_guard lock(mutex_);
        tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
}

void ConnectionPool::shutdown() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
}

void ConnectionPool::work() {
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
            if (tasks_.empty()) return;  // stopping, and nothing left to serve
            task = std::move(tasks_.front());
            tasks_.pop_front();
        }
        task();
    }
}

}  // namespace colibri::server
