#include "server/local_server.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include "server/client/colibri_local_protocol.h"

namespace colibri::server {

namespace {

using Clock = std::chrono::steady_clock;

void futex_wake(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, 1, nullptr, nullptr, 0); }

// The producer's side of one connection's ring (written only by the engine thread while a job runs).
class RingWriter {
public:
    RingWriter(colibri_ring_control* control, uint8_t* data, uint32_t bytes) : c_(control), data_(data), size_(bytes) {}

    void reset() {
        __atomic_store_n(&c_->head, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c_->tail, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c_->head_seq, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c_->head_waiting, 0, __ATOMIC_RELEASE);
    }

    // Appends a record of header + a + b; false when the client left no room for it.
    bool write(uint16_t kind, const void* a, size_t na, const void* b = nullptr, size_t nb = 0) {
        const size_t len = (sizeof(colibri_record_header) + na + nb + 7) & ~size_t(7);
        if (len > size_ / 2) return false;
        const uint64_t head = __atomic_load_n(&c_->head, __ATOMIC_RELAXED);
        const uint64_t tail = __atomic_load_n(&c_->tail, __ATOMIC_ACQUIRE);
        const uint64_t pos = head % size_;
        const uint64_t pad = pos + len > size_ ? size_ - pos : 0;
        if (head - tail + pad + len > size_) return false;
        uint64_t at = head;
        if (pad) {
            const colibri_record_header h{static_cast<uint32_t>(pad), COLIBRI_RECORD_PAD, 0};
            std::memcpy(data_ + pos, &h, sizeof h);
            at += pad;
        }
        uint8_t* p = data_ + at % size_;
        const colibri_record_header h{static_cast<uint32_t>(len), kind, 0};
        std::memcpy(p, &h, sizeof h);
        if (na) std::memcpy(p + sizeof h, a, na);
        if (nb) std::memcpy(p + sizeof h + na, b, nb);
        __atomic_store_n(&c_->head, at + len, __ATOMIC_RELEASE);
        __atomic_add_fetch(&c_->head_seq, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&c_->head_waiting, __ATOMIC_SEQ_CST)) futex_wake(&c_->head_seq);
        return true;
    }

private:
    colibri_ring_control* c_;
    uint8_t* data_;
    uint32_t size_;
};

// A job's events written straight into the connection's ring on the engine thread; the connection's thread
// learns of the end through an eventfd.
class RingSink final : public JobSink {
public:
    RingSink(RingWriter& ring, int done_fd) : ring_(ring), done_fd_(done_fd) {}
    std::weak_ptr<Job> job;

    void on_event(JobEvent&& e) override {
        if (overflow_) return;
        const TokenEvent& t = e.token;
        const colibri_token_record r{t.id, t.logprob.id >= 0 ? t.logprob.logprob : NAN, static_cast<uint32_t>(t.text.size()), t.index};
        if (!ring_.write(COLIBRI_RECORD_TOKEN, &r, sizeof r, t.text.data(), t.text.size())) {
            // The client stopped reading: end the job rather than block the engine.
            overflow_ = true;
            if (auto j = job.lock()) j->cancel();
        }
    }
    void on_finish(JobOutcome&& o) override {
        if (!o.error.empty() || overflow_) {
            const std::string body = dump(error_body(
                {overflow_ ? 429 : 500, "server_error", overflow_ ? "the client did not read its ring; the request was cancelled" : o.error, "", ""}));
            const colibri_error_record r{overflow_ ? 429u : 500u, static_cast<uint32_t>(body.size())};
            if (!ring_.write(COLIBRI_RECORD_ERROR, &r, sizeof r, body.data(), body.size())) ring_.write(COLIBRI_RECORD_ERROR, &r, sizeof r);
        } else {
            const uint32_t finish = o.finish == FinishReason::Stop ? 1 : o.finish == FinishReason::Length ? 2 : 3;
            const colibri_end_record r{finish, o.prompt_tokens, o.cached_tokens, o.completion_tokens, o.queued_ms, o.prompt_ms, o.decode_ms};
            if (!ring_.write(COLIBRI_RECORD_END, &r, sizeof r)) {
                const colibri_error_record e{429, 0};
                ring_.write(COLIBRI_RECORD_ERROR, &e, sizeof e);
            }
        }
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(done_fd_, &one, sizeof one);
    }

private:
    RingWriter& ring_;
    int done_fd_;
    bool overflow_ = false;
};

// Reads exactly n bytes before the deadline; false on timeout, error or end of stream.
bool read_exact(int fd, void* out, size_t n, Clock::time_point deadline) {
    auto* p = static_cast<uint8_t*>(out);
    while (n > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return false;
        pollfd pfd{fd, POLLIN, 0};
        const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        const ssize_t got = ::recv(fd, p, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        p += got;
        n -= static_cast<size_t>(got);
    }
    return true;
}

bool write_all(int fd, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

bool send_reply(int fd, uint32_t status, uint32_t ring, const std::string& body = {}, int pass_fd = -1) {
    const colibri_local_reply_header h{COLIBRI_LOCAL_MAGIC, status, ring, static_cast<uint32_t>(body.size())};
    if (pass_fd < 0) return write_all(fd, &h, sizeof h) && write_all(fd, body.data(), body.size());
    iovec iov{const_cast<colibri_local_reply_header*>(&h), sizeof h};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    ssize_t n;
    do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof h) && write_all(fd, body.data(), body.size());
}

bool send_error(int fd, const ApiError& e) { return send_reply(fd, static_cast<uint32_t>(e.status), 0, dump(error_body(e))); }

}  // namespace

class LocalServer::Impl {
public:
    Impl(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const LocalOptions& options)
        : scheduler_(scheduler), served_(served), limits_(limits), options_(options), seeds_(std::random_device{}()) {}
    ~Impl() { stop(); }

    Status start() {
        uint32_t bytes = 4096;
        while (bytes < options_.ring_bytes) bytes <<= 1;
        options_.ring_bytes = bytes;
        options_.rings = std::max(options_.rings, 1u);
        COLIBRI_TRY(open_socket());
        if (Status s = open_shm(); !s) {
            ::close(listen_fd_);
            ::unlink(options_.socket_path.c_str());
            listen_fd_ = -1;
            return s;
        }
        for (uint32_t i = 0; i < options_.rings; ++i) {
            auto* control = reinterpret_cast<colibri_ring_control*>(shm_ + colibri_ring_offset(header(), i));
            rings_.emplace_back(control, reinterpret_cast<uint8_t*>(control + 1), options_.ring_bytes);
            free_.push_back(i);
        }
        accept_thread_ = std::thread([this] { accept_loop(); });
        return Status::ok();
    }

    void stop() {
        if (stopping_.exchange(true)) return;
        if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
        if (accept_thread_.joinable()) accept_thread_.join();
        {
            std::lock_guard lock(mutex_);
            for (int fd : connection_fds_) ::shutdown(fd, SHUT_RDWR);
        }
        for (auto& c : connections_) c.thread.join();
        if (listen_fd_ >= 0) {
            ::close(listen_fd_);
            ::unlink(options_.socket_path.c_str());
        }
        if (shm_) {
            ::munmap(shm_, shm_size_);
            ::shm_unlink(shm_name().c_str());
        }
        if (shm_fd_ >= 0) ::close(shm_fd_);
    }

private:
    std::string shm_name() const { return "/colibri-" + options_.shm_key; }
    colibri_shm_header* header() const { return reinterpret_cast<colibri_shm_header*>(shm_); }

    Status open_socket() {
        const std::string& path = options_.socket_path;
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        if (path.empty() || path.size() >= sizeof addr.sun_path) return error("--socket: the path must be 1 to 107 bytes");
        std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
        struct stat st{};
        if (::lstat(path.c_str(), &st) == 0) {
            if (!S_ISSOCK(st.st_mode)) return error(path + ": exists and is not a socket");
            // A socket nobody listens on is left from a server that is gone.
            const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            const bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
            ::close(probe);
            if (live) return error(path + ": another server is listening there");
            ::unlink(path.c_str());
        }
        listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) return error(std::string("socket: ") + std::strerror(errno));
        // Created 0660 from the start: no moment where others could connect.
        const mode_t old = ::umask(0117);
        const int bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
        ::umask(old);
        if (bound != 0 || ::chmod(path.c_str(), 0660) != 0 || ::listen(listen_fd_, 64) != 0) {
            const std::string why = std::strerror(errno);
            ::close(listen_fd_);
            listen_fd_ = -1;
            return error(path + ": " + why);
        }
        return Status::ok();
    }

    Status open_shm() {
        const std::string& key = options_.shm_key;
        if (key.empty() || key.size() > 200 || key.find('/') != std::string::npos) return error("--shm-key: 1 to 200 characters, no '/'");
        const colibri_shm_header layout = dummy_header();
        shm_size_ = colibri_ring_offset(&layout, options_.rings);
        // The socket check above showed no live server: shared memory under this name is stale.
        ::shm_unlink(shm_name().c_str());
        shm_fd_ = ::shm_open(shm_name().c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (shm_fd_ < 0) return error("shared memory " + shm_name() + ": " + std::strerror(errno));
        if (::fchmod(shm_fd_, 0600) != 0 || ::ftruncate(shm_fd_, static_cast<off_t>(shm_size_)) != 0)
            return error("shared memory " + shm_name() + ": " + std::strerror(errno));
        void* p = ::mmap(nullptr, shm_size_, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd_, 0);
        if (p == MAP_FAILED) return error("shared memory " + shm_name() + ": " + std::strerror(errno));
        shm_ = static_cast<uint8_t*>(p);
        *header() = dummy_header();
        return Status::ok();
    }
    colibri_shm_header dummy_header() const {
        colibri_shm_header h{};
        h.magic = COLIBRI_LOCAL_MAGIC;
        h.version = COLIBRI_LOCAL_VERSION;
        h.rings = options_.rings;
        h.ring_bytes = options_.ring_bytes;
        return h;
    }

    void accept_loop() {
        while (!stopping_) {
            const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (stopping_ || errno == EINVAL || errno == EBADF) break;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE and the like: try again
                continue;
            }
            std::lock_guard lock(mutex_);
            if (free_.empty()) {
                send_error(fd, {429, "server_busy", "every local connection is in use (" + std::to_string(options_.rings) + "); retry later", "",
                                "too_many_connections"});
                ::close(fd);
                continue;
            }
            const uint32_t ring = free_.front();
            free_.pop_front();
            connection_fds_.push_back(fd);
            // Threads of closed connections are joined here, so that they do not pile up.
            for (auto it = connections_.begin(); it != connections_.end();) {
                if (it->finished->load()) {
                    it->thread.join();
                    it = connections_.erase(it);
                } else {
                    ++it;
                }
            }
            auto finished = std::make_shared<std::atomic<bool>>(false);
            connections_.push_back({std::thread([this, fd, ring, finished] {
                                        serve(fd, ring);
                                        finished->store(true);
                                    }),
                                    finished});
        }
    }

    void serve(int fd, uint32_t ring_index) {
        RingWriter& ring = rings_[ring_index];
        ring.reset();
        const int done_fd = ::eventfd(0, EFD_CLOEXEC);
        if (done_fd >= 0 && send_reply(fd, 200, ring_index, {}, shm_fd_)) {
            while (!stopping_ && serve_request(fd, ring, done_fd)) {
            }
        }
        if (done_fd >= 0) ::close(done_fd);
        std::lock_guard lock(mutex_);
        std::erase(connection_fds_, fd);
        ::close(fd);
        free_.push_back(ring_index);
    }

    // One request on the connection; false when the connection should close.
    bool serve_request(int fd, RingWriter& ring, int done_fd) {
        // Idle between requests as long as the client likes; once a request starts it must arrive whole in time.
        pollfd idle{fd, POLLIN, 0};
        while (!stopping_) {
            const int r = ::poll(&idle, 1, 500);
            if (r > 0) break;
            if (r < 0 && errno != EINTR) return false;
        }
        if (stopping_) return false;
        const auto deadline = Clock::now() + std::chrono::seconds(options_.request_timeout_s);
        colibri_local_request_header h{};
        if (!read_exact(fd, &h, sizeof h, deadline)) return false;
        if (h.magic != COLIBRI_LOCAL_MAGIC || h.version != COLIBRI_LOCAL_VERSION) {
            send_error(fd, {400, "invalid_request_error", "not a colibri local request (magic or version)", "", ""});
            return false;
        }
        if (h.kind == COLIBRI_LOCAL_CANCEL) return true;  // nothing running: nothing to cancel
        if (h.kind != COLIBRI_LOCAL_CHAT && h.kind != COLIBRI_LOCAL_COMPLETIONS) {
            send_error(fd, {400, "invalid_request_error", "unknown request kind " + std::to_string(h.kind), "", ""});
            return false;
        }
        if (h.length > COLIBRI_LOCAL_MAX_BODY) {
            send_error(fd, {413, "invalid_request_error", "the request body is larger than this server accepts", "", "request_too_large"});
            return false;
        }
        std::string body(h.length, '\0');
        if (!read_exact(fd, body.data(), body.size(), deadline)) return false;
        auto parsed = [&] {
            std::lock_guard lock(seeds_mutex_);
            return parse_request(h.kind == COLIBRI_LOCAL_CHAT ? Endpoint::Chat : Endpoint::Completions, body, served_, limits_, seeds_);
        }();
        if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(fd, *e);
        auto sink = std::make_shared<RingSink>(ring, done_fd);
        auto job = std::make_shared<Job>(std::move(std::get<ApiRequest>(parsed).spec), sink);
        sink->job = job;
        if (!scheduler_.submit(job))
            return send_error(fd, {429, "server_busy", "too many requests are waiting for a slot; retry later", "", "too_many_requests"});
        if (!send_reply(fd, 200, 0)) {
            job->cancel();
            wait_done(done_fd);
            return false;
        }
        // Until the job ends: a cancel header or a closed socket cancels it. The header is peeked first: the
        // client may already have read the job's end from the ring and sent its next request before the done
        // signal reaches this thread; that request is left for the next serve_request.
        bool keep = true, watch = true;
        for (;;) {
            pollfd p[2] = {{done_fd, POLLIN, 0}, {fd, POLLIN, 0}};
            const int r = ::poll(p, watch ? 2 : 1, -1);
            if (r < 0 && errno == EINTR) continue;
            if (p[0].revents & POLLIN) break;
            if (!watch || !(p[1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            colibri_local_request_header c{};
            ssize_t n;
            do n = ::recv(fd, &c, sizeof c, MSG_PEEK | MSG_DONTWAIT);
            while (n < 0 && errno == EINTR);
            if (n > 0 && static_cast<size_t>(n) < sizeof c) {
                pollfd d{done_fd, POLLIN, 0};  // a header on its way: look again in a millisecond
                ::poll(&d, 1, 1);
                continue;
            }
            const bool whole = n == static_cast<ssize_t>(sizeof c) && c.magic == COLIBRI_LOCAL_MAGIC && c.version == COLIBRI_LOCAL_VERSION;
            if (whole && c.kind == COLIBRI_LOCAL_CANCEL) {
                read_exact(fd, &c, sizeof c, Clock::now() + std::chrono::seconds(options_.request_timeout_s));
                job->cancel();
            } else if (whole && (c.kind == COLIBRI_LOCAL_CHAT || c.kind == COLIBRI_LOCAL_COMPLETIONS)) {
                watch = false;  // the next request: this job has ended
            } else {
                keep = watch = false;  // gone, or talking nonsense mid-request: cancel, close after the job ends
                job->cancel();
            }
        }
        wait_done(done_fd);
        return keep;
    }

    static void wait_done(int done_fd) {
        uint64_t v;
        while (::read(done_fd, &v, sizeof v) < 0 && errno == EINTR) {
        }
    }

    Scheduler& scheduler_;
    const ServedModel& served_;
    ApiLimits limits_;
    LocalOptions options_;
    int listen_fd_ = -1, shm_fd_ = -1;
    uint8_t* shm_ = nullptr;
    size_t shm_size_ = 0;
    std::vector<RingWriter> rings_;
    std::mutex mutex_;
    std::list<uint32_t> free_;
    std::vector<int> connection_fds_;
    struct Connection {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> finished;
    };
    std::list<Connection> connections_;
    std::thread accept_thread_;
    std::atomic<bool> stopping_{false};
    std::mutex seeds_mutex_;
    std::mt19937_64 seeds_;
};

LocalServer::LocalServer(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const LocalOptions& options)
    : impl_(std::make_unique<Impl>(scheduler, served, limits, options)) {}
LocalServer::~LocalServer() = default;
Status LocalServer::start() { return impl_->start(); }
void LocalServer::stop() { impl_->stop(); }

}  // namespace colibri::server
