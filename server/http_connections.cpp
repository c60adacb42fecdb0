#include "server/http_connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>

namespace colibri::server {

namespace {

thread_local Connection* t_current = nullptr;

constexpr auto kDrainTime = std::chrono::seconds(2);  // a refused request's unread rest, read and dropped

// What a request head says of its body: its Content-Length (SIZE_MAX when unusable: the worker reads it),
// and whether the client waits for "100 Continue" before sending it.
struct HeadInfo {
    size_t length = 0;
    bool expect = false;
};
HeadInfo scan_head(std::string_view head) {
    auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
    auto named = [&](std::string_view line, std::string_view name) {
        return line.size() > name.size() && std::equal(name.begin(), name.end(), line.begin(), [&](char a, char b) { return a == lower(b); });
    };
    HeadInfo info;
    for (size_t end = head.find('\n'); end != std::string_view::npos && end + 1 < head.size();) {  // after the request line
        const size_t begin = end + 1;
        end = head.find('\n', begin);
        const std::string_view line = head.substr(begin, (end == std::string_view::npos ? head.size() : end) - begin);
        if (named(line, "expect:")) info.expect = true;
        if (!named(line, "content-length:")) continue;
        size_t value = 0, i = std::string_view("content-length:").size();
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        if (i == line.size() || line[i] < '0' || line[i] > '9') value = SIZE_MAX;
        for (; value != SIZE_MAX && i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
            value = value > (SIZE_MAX - 9) / 10 ? SIZE_MAX : value * 10 + static_cast<size_t>(line[i] - '0');
        info.length = value;
    }
    return info;
}

}  // namespace

// ---- Connection ----

Connection::~Connection() { ::close(sock_); }

int Connection::wait(short events, int ms) const {
    pollfd p{sock_, events, 0};
    int r;
    do r = ::poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) ? r : (r > 0 ? 0 : r);
}

int Connection::remaining_ms() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

bool Connection::is_readable() const { return buffered() > 0 || wait(POLLIN, std::min(io_timeout_ms_, remaining_ms())) > 0; }
bool Connection::is_writable() const { return wait(POLLOUT, io_timeout_ms_) > 0 && peer_alive(); }

ssize_t Connection::read(char* ptr, size_t size) {
    if (buffered() == 0) {
        in_.clear();
        pos_ = 0;
        const int ms = remaining_ms();
        if (ms <= 0 || wait(POLLIN, std::min(io_timeout_ms_, ms)) <= 0) return -1;
        char buf[4096];
        ssize_t n;
        do n = ::recv(sock_, buf, sizeof buf, 0);
        while (n < 0 && errno == EINTR);
        if (n <= 0) return n;
        in_.assign(buf, static_cast<size_t>(n));
    }
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
    size_t done = 0;
    while (done < size) {
        if (wait(POLLOUT, io_timeout_ms_) <= 0) return -1;
        const ssize_t n = ::send(sock_, ptr + done, size - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
}

bool Connection::peer_alive() const {
    if (buffered() > 0) return true;
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static void address_of(int sock, int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (get(sock, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&a);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
        auto* in = reinterpret_cast<sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
        port = ntohs(in->sin6_port);
    }
    ip = host;
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(sock_, ::getpeername, ip, port); }
void Connection::get_local_ip_and_port(std::string& ip, int& port) const { address_of(sock_, ::getsockname, ip, port); }

bool Connection::request_ready(size_t limit) const {
    const std::string_view b(in_.data() + pos_, buffered());
    if (b.size() >= limit) return true;  // as much as a waiting connection may buffer: the worker reads on
    const size_t head_end = b.find("\r\n\r\n");
    if (head_end == std::string_view::npos) return false;
    const size_t head = head_end + 4;
    const HeadInfo info = scan_head(b.substr(0, head));
    return info.expect || b.size() - head >= std::min(info.length, limit - head);
}

// ---- ConnectionPool ----

ConnectionPool::ConnectionPool(const ConnectionLimits& limits, Serve serve) : limits_(limits), serve_(std::move(serve)) {
    limits_.workers = std::max(limits_.workers, 1u);
    limits_.max_connections = std::max<size_t>(limits_.max_connections, 1);
    limits_.keep_alive_max = std::max<size_t>(limits_.keep_alive_max, 1);
    limits_.max_buffered = std::max<size_t>(limits_.max_buffered, 1024);
}

ConnectionPool::~ConnectionPool() { stop(); }

Connection* ConnectionPool::current() { return t_current; }

Status ConnectionPool::start() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) return Status::error(std::string("cannot create an epoll set: ") + std::strerror(errno));
    try {
        poller_ = std::thread([this] { poll_loop(); });
        for (unsigned i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { work_loop(); });
    } catch (const std::system_error& e) {
        stop();
        return Status::error(std::string("cannot start the HTTP server's threads: ") + e.what());
    }
    return Status::ok();
}

void ConnectionPool::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    ready_cv_.notify_all();
    if (poller_.joinable()) poller_.join();
    for (std::thread& t : workers_)
        if (t.joinable()) t.join();
    workers_.clear();
    std::lock_guard lock(mutex_);
    entries_.clear();  // every connection's socket closes
    ready_.clear();
    if (epoll_ >= 0) ::close(epoll_);
    epoll_ = -1;
}

void ConnectionPool::add(int sock) {
    std::lock_guard lock(mutex_);
    if (stopping_ || epoll_ < 0 || (entries_.size() >= limits_.max_connections && !evict_locked())) {
        ::close(sock);
        return;
    }
    Entry& e = entries_[sock];
    e.connection = std::make_unique<Connection>(sock, limits_.io_timeout_s);
    wait_or_queue(sock, e);
}

ConnectionStats ConnectionPool::counts() const {
    std::lock_guard lock(mutex_);
    ConnectionStats c;
    for (const auto& [fd, e] : entries_) c.waiting += e.state == State::Waiting ? 1 : 0;
    c.queued = ready_.size();
    c.serving = serving_;
    c.evicted = evicted_;
    c.timed_out = timed_out_;
    return c;
}

void ConnectionPool::close_locked(int fd) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    entries_.erase(fd);
}

bool ConnectionPool::evict_locked() {
    // A refused request's drain first, then connections that never completed a request, then idle keep-alive
    // ones; the oldest of each.
    auto rank = [](const Entry& e) { return e.state == State::Draining ? 0 : e.connection->requests_ == 0 ? 1 : 2; };
    int victim = -1;
    const Entry* best = nullptr;
    for (const auto& [fd, e] : entries_) {
        if (e.state != State::Waiting && e.state != State::Draining) continue;
        if (best == nullptr || rank(e) < rank(*best) || (rank(e) == rank(*best) && e.since < best->since)) best = &e, victim = fd;
    }
    if (best == nullptr) return false;
    close_locked(victim);
    ++evicted_;
    return true;
}

void ConnectionPool::wait_or_queue(int fd, Entry& e) {
    Connection& c = *e.connection;
    c.in_.erase(0, c.pos_);
    c.pos_ = 0;
    if (c.in_.empty()) std::string().swap(c.in_);  // an idle connection keeps no buffer
    const auto now = Clock::now();
    e.since = now;
    if (c.buffered() > 0) c.deadline_ = now + std::chrono::seconds(limits_.request_timeout_s);  // a pipelined request began
    if (c.request_ready(limits_.max_buffered)) {
        e.state = State::Queued;
        ready_.push_back(fd);
        ready_cv_.notify_one();
        return;
    }
    e.state = State::Waiting;
    e.deadline = c.buffered() > 0 ? c.deadline_ : now + std::chrono::seconds(limits_.idle_timeout_s);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) close_locked(fd);
}

void ConnectionPool::on_readable(int fd, Entry& e) {
    Connection& c = *e.connection;
    char buf[16384];
    if (e.state == State::Draining) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) c.drained_ += static_cast<size_t>(n);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || c.drained_ > limits_.max_drained) close_locked(fd);
        return;
    }
    const size_t room = std::min(sizeof buf, limits_.max_buffered - std::min(limits_.max_buffered, c.buffered()));
    const ssize_t n = room == 0 ? 0 : ::recv(fd, buf, room, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    const bool eof = n <= 0;
    if (n > 0) {
        if (c.buffered() == 0) {  // the first byte of a request: its deadline starts
            c.deadline_ = Clock::now() + std::chrono::seconds(limits_.request_timeout_s);
            e.deadline = c.deadline_;
        }
        c.in_.append(buf, static_cast<size_t>(n));
    }
    if (c.request_ready(limits_.max_buffered)) {
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        e.state = State::Queued;
        e.since = Clock::now();
        ready_.push_back(fd);
        ready_cv_.notify_one();
    } else if (eof) {
        close_locked(fd);  // the client left (or its request cannot be answered)
    }
}

void ConnectionPool::poll_loop() {
    epoll_event events[256];
    auto next_sweep = Clock::now();
    for (;;) {
        const int n = ::epoll_wait(epoll_, events, 256, 100);
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        for (int i = 0; i < n; ++i) {
            const int fd = events[i].data.fd;
            auto it = entries_.find(fd);
            if (it != entries_.end() && (it->second.state == State::Waiting || it->second.state == State::Draining)) on_readable(fd, it->second);
        }
        const auto now = Clock::now();
        if (now < next_sweep) continue;
        next_sweep = now + std::chrono::milliseconds(100);
        std::vector<int> expired;
        for (const auto& [fd, e] : entries_)
            if ((e.state == State::Waiting || e.state == State::Draining) && e.deadline <= now) expired.push_back(fd);
        for (int fd : expired) {
            timed_out_ += entries_.at(fd).state == State::Waiting ? 1 : 0;
            close_locked(fd);
        }
    }
}

void ConnectionPool::work_loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
        if (stopping_) return;
        const int fd = ready_.front();
        ready_.pop_front();
        auto it = entries_.find(fd);
        if (it == entries_.end() || it->second.state != State::Queued) continue;
        Entry& e = it->second;
        Connection& c = *e.connection;
        e.state = State::Serving;
        c.deadline_ += Clock::now() - e.since;  // the time it waited for a worker is not the client's
        ++serving_;
        c.close_after_ = false;
        lock.unlock();
        t_current = &c;
        bool keep = false;
        try {
            keep = serve_(c, c.requests_ + 1 >= limits_.keep_alive_max);
        } catch (...) {
            keep = false;  // httplib reports a handler's exception itself; anything else ends the connection
        }
        t_current = nullptr;
        ++c.requests_;
        lock.lock();
        --serving_;
        if (stopping_) {
            close_locked(fd);
        } else if (c.close_after_) {
            // Tell the client we are done, and read what it still sends for a moment: closing a socket with
            // unread bytes resets the connection, and the reset could destroy the answer before it is read.
            ::shutdown(fd, SHUT_WR);
            c.in_.clear();
            c.pos_ = 0;
            e.state = State::Draining;
            e.since = Clock::now();
            e.deadline = e.since + kDrainTime;
            epoll_event ev{};
            ev.events = EPOLLIN | EPOLLRDHUP;
            ev.data.fd = fd;
            if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) close_locked(fd);
        } else if (!keep || c.requests_ >= limits_.keep_alive_max) {
            close_locked(fd);
        } else {
            wait_or_queue(fd, e);
        }
    }
}

}  // namespace colibri::server
