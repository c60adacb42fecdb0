// The HTTP front end's connections, served so that idle or slow clients cannot starve the others. A connection
// holds a worker thread only while one of its requests is answered: before its first request and between
// requests it waits in one epoll set, which buffers its bytes and hands it to the workers (first come, first
// served) once its request head and the start of its body have arrived. A waiting connection costs a
// descriptor and at most `max_buffered` bytes; it closes at its idle or request deadline, and when the
// connection cap is reached the waiting connection that never completed a request, oldest first, makes room.
#pragma once
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/base/status.h"
#include "server/metrics.h"

namespace colibri::server {

// A connection's socket as httplib reads and writes it: the bytes the poller buffered come first, and a request
// must arrive whole within its deadline (httplib's timeout is per read, so a client that sends a byte every few
// seconds would otherwise hold a worker for ever).
class Connection final : public httplib::Stream {
public:
    Connection(int sock, int io_timeout_s) : sock_(sock), io_timeout_ms_(io_timeout_s * 1000) {}
    ~Connection() override;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char* ptr, size_t size) override;
    ssize_t write(const char* ptr, size_t size) override;
    void get_remote_ip_and_port(std::string& ip, int& port) const override;
    void get_local_ip_and_port(std::string& ip, int& port) const override;
    socket_t socket() const override { return sock_; }

    // The peer has not closed its end (a handler waiting for a whole reply asks).
    bool peer_alive() const;
    // The answer leaves part of the request unread (refused before its body, a body over the limit): the
    // connection closes after it, reading what the client still sends for a moment so that the answer arrives.
    void close_after_response() { close_after_ = true; }
    bool closing() const { return close_after_; }

private:
    friend class ConnectionPool;
    using Clock = std::chrono::steady_clock;
    int wait(short events, int ms) const;
    int remaining_ms() const;
    size_t buffered() const { return in_.size() - pos_; }
    // A request whose head (and the start of its body, up to `limit` bytes buffered in all) has arrived.
    bool request_ready(size_t limit) const;

    int sock_;
    int io_timeout_ms_;
    Clock::time_point deadline_ = Clock::now();  // the current request's
    std::string in_;                              // bytes read from the socket; in_[pos_..] not taken yet
    size_t pos_ = 0;
    bool close_after_ = false;
    size_t requests_ = 0;  // answered on this connection
    size_t drained_ = 0;   // bytes read and dropped after a refused request
};

struct ConnectionLimits {
    int request_timeout_s = 10;     // a request's head and body must arrive within this, from its first byte
    int io_timeout_s = 10;          // one read or write of a request being answered may wait this long
    int idle_timeout_s = 5;         // a connection with no request under way closes after this
    unsigned workers = 64;          // requests answered at once (a stream holds one for its length)
    size_t max_connections = 1024;  // open at once
    size_t keep_alive_max = 100;    // requests per connection
    size_t max_buffered = 16384;    // per waiting connection: its request head and the start of its body
    size_t max_drained = 1u << 20;  // bytes read and dropped after a refused request before closing anyway
};

class ConnectionPool {
public:
    // Answers one request on the connection; false closes it. `last`: the connection's last request.
    using Serve = std::function<bool(Connection& connection, bool last)>;

    ConnectionPool(const ConnectionLimits& limits, Serve serve);
    ~ConnectionPool();
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    // Starts the poller and the workers; an error when the system refuses a thread or the epoll set.
    Status start();
    // A socket accept() returned; the pool owns it from here (it may close it at once when full or stopping).
    void add(int sock);
    // Closes the waiting connections, lets each worker finish its request, and joins the threads.
    void stop();

    // The connection the calling worker thread is answering (nullptr outside a worker).
    static Connection* current();

    ConnectionStats counts() const;

private:
    using Clock = std::chrono::steady_clock;
    enum class State { Waiting, Queued, Serving, Draining };
    struct Entry {
        std::unique_ptr<Connection> connection;
        State state = State::Waiting;
        Clock::time_point deadline;  // Waiting: idle or request deadline; Draining: when to give up
        Clock::time_point since;     // when it began waiting or was queued (eviction picks the oldest)
    };

    void poll_loop();
    void work_loop();
    void on_readable(int fd, Entry& e);                 // mutex_ held
    void wait_or_queue(int fd, Entry& e);               // mutex_ held: after a request, or when added
    void close_locked(int fd);                          // mutex_ held
    bool evict_locked();                                // mutex_ held: makes room for one more

    ConnectionLimits limits_;
    Serve serve_;
    int epoll_ = -1;
    mutable std::mutex mutex_;
    std::condition_variable ready_cv_;
    std::unordered_map<int, Entry> entries_;  // guarded by mutex_
    std::deque<int> ready_;                   // connections with a request, in arrival order
    bool stopping_ = false;
    size_t serving_ = 0;
    uint64_t evicted_ = 0, timed_out_ = 0;
    std::thread poller_;
    std::vector<std::thread> workers_;
};

}  // namespace colibri::server
