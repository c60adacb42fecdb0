#include "server/local_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <random>
#include <thread>

#include "server/api_keys.h"
#include "server/client/colibri_local_protocol.h"
#include "server/fd_passing.h"
#include "server/local_ring.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

namespace colibri::server {

namespace {

using Clock = std::chrono::steady_clock;

// A job's events written straight into the connection's ring on the engine thread; the connection's thread
// learns of the end through an eventfd.
class RingSink final : public JobSink {
public:
    RingSink(RingWriter& ring, int done_fd) : ring_(ring), done_fd_(done_fd) {}
    std::weak_ptr<Job> job;
    // The request's last record did not fit (the client's page says its ring is full): the client cannot learn
    // that the request is over from the ring, so the connection closes.
    bool lost_end() const { return lost_end_; }

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
        bool written;
        if (!o.error.empty() || overflow_) {
            ApiError e{overflow_ ? 429 : 500, "server_error", overflow_ ? "the client did not read its ring; the request was cancelled" : o.error, "", ""};
            // The error must fit the room kept for the last record.
            if (e.message.size() > RingWriter::kFinalRecordBytes / 2) e.message.resize(RingWriter::kFinalRecordBytes / 2);
            const std::string body = dump(error_body(e));
            const colibri_error_record r{static_cast<uint32_t>(e.status), static_cast<uint32_t>(body.size())};
            written = ring_.write(COLIBRI_RECORD_ERROR, &r, sizeof r, body.data(), body.size(), true) ||
                      ring_.write(COLIBRI_RECORD_ERROR, &r, sizeof r, nullptr, 0, true);
        } else {
            const uint32_t finish = o.finish == FinishReason::Stop ? 1 : o.finish == FinishReason::Length ? 2 : 3;
            const colibri_end_record r{finish, o.prompt_tokens, o.cached_tokens, o.completion_tokens, o.queued_ms, o.prompt_ms, o.decode_ms};
            written = ring_.write(COLIBRI_RECORD_END, &r, sizeof r, nullptr, 0, true);
        }
        lost_end_ = !written;
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(done_fd_, &one, sizeof one);
    }

private:
    RingWriter& ring_;
    int done_fd_;
    bool overflow_ = false, lost_end_ = false;
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

// A reply header, its body, and with a 200 to a HELLO the connection's two descriptors.
bool send_reply(int fd, uint32_t status, const std::string& body = {}, const int* pass_fds = nullptr, size_t n_fds = 0) {
    const colibri_local_reply_header h{COLIBRI_LOCAL_MAGIC, status, 0, static_cast<uint32_t>(body.size())};
    if (n_fds == 0) return write_all(fd, &h, sizeof h) && write_all(fd, body.data(), body.size());
    return send_with_fds(fd, &h, sizeof h, pass_fds, n_fds) && write_all(fd, body.data(), body.size());
}

bool send_error(int fd, const ApiError& e) { return send_reply(fd, static_cast<uint32_t>(e.status), dump(error_body(e))); }

// Shared memory made for one connection: a memfd sealed against shrinking and growing, so that no client can
// make the server fault on it.
class ConnectionMemory {
public:
    ConnectionMemory() = default;
    ConnectionMemory(const ConnectionMemory&) = delete;
    ConnectionMemory& operator=(const ConnectionMemory&) = delete;
    ~ConnectionMemory() {
        if (map_ != nullptr) ::munmap(map_, size_);
        if (fd_ >= 0) ::close(fd_);
    }

    // mode: who may open it again through /proc (the owner only; read-only for the reply segment).
    Status create(const std::string& name, size_t size, mode_t mode, int prot) {
        fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
        if (fd_ < 0 && errno == EINVAL) fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);  // before Linux 6.3
        if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(size)) != 0 || ::fchmod(fd_, mode) != 0 ||
            ::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
            return error("shared memory for a connection: " + std::string(std::strerror(errno)));
        void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED) return error("shared memory for a connection: " + std::string(std::strerror(errno)));
        map_ = p;
        size_ = size;
        return Status::ok();
    }
    // A new descriptor of the same memory that can only read it (the reply segment's, for its client).
    int open_read_only() const { return ::open(("/proc/self/fd/" + std::to_string(fd_)).c_str(), O_RDONLY | O_CLOEXEC); }
    // Frees the pages, also for a client that keeps its mapping after the connection ended (it reads zeros).
    void release_pages() const {
        if (fd_ >= 0) ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size_));
    }
    int fd() const { return fd_; }
    uint8_t* bytes() const { return static_cast<uint8_t*>(map_); }

private:
    int fd_ = -1;
    void* map_ = nullptr;
    size_t size_ = 0;
};

}  // namespace

class LocalServer::Impl {
public:
    Impl(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const LocalOptions& options)
        : scheduler_(scheduler), served_(served), limits_(limits), options_(options), keys_(options.api_keys), seeds_(std::random_device{}()) {}
    ~Impl() { stop(); }

    Status start() {
        if (options_.name.empty() || options_.name.size() > 200 || options_.name.find('/') != std::string::npos)
            return error("--shm-key: 1 to 200 characters, no '/'");
        uint32_t bytes = COLIBRI_LOCAL_MIN_RING;
        while (bytes < options_.ring_bytes && bytes < COLIBRI_LOCAL_MAX_RING) bytes <<= 1;
        options_.ring_bytes = bytes;
        options_.max_connections = std::max(options_.max_connections, 1u);
        if (options_.max_per_user == 0) options_.max_per_user = std::max(1u, options_.max_connections / 2);
        options_.max_per_user = std::min(options_.max_per_user, options_.max_connections);
        COLIBRI_TRY(open_socket());
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
    }

private:
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

    void accept_loop() {
        while (!stopping_) {
            const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (stopping_ || errno == EINVAL || errno == EBADF) break;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE and the like: try again
                continue;
            }
            ucred peer{};
            socklen_t peer_size = sizeof peer;
            if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0) {
                ::close(fd);
                continue;
            }
            std::lock_guard lock(mutex_);
            // Threads of closed connections are joined here, so that they do not pile up.
            for (auto it = connections_.begin(); it != connections_.end();) {
                if (it->finished->load()) {
                    it->thread.join();
                    it = connections_.erase(it);
                } else {
                    ++it;
                }
            }
            if (std::optional<ApiError> refusal = refuse(peer.uid)) {
                // The refusal fits the socket's buffer: this never blocks the accepting thread.
                send_error(fd, *refusal);
                ::close(fd);
                continue;
            }
            auto finished = std::make_shared<std::atomic<bool>>(false);
            std::thread thread;
            try {  // a process or memory limit refuses the thread: this connection is answered, the server goes on
                thread = std::thread([this, fd, uid = peer.uid, finished] {
                    serve(fd);
                    close_connection(fd, uid);
                    finished->store(true);
                });
            } catch (const std::system_error& e) {
                send_error(fd, {503, "server_error", std::string("cannot start a thread for the connection: ") + e.what() + "; retry later", "", ""});
                ::close(fd);
                continue;
            }
            ++open_;
            ++per_user_[peer.uid];
            connection_fds_.push_back(fd);
            connections_.push_back({std::move(thread), finished});
        }
    }

    // Why a new connection from uid is refused (mutex_ held), or nothing.
    std::optional<ApiError> refuse(uid_t uid) const {
        if (open_ >= options_.max_connections)
            return ApiError{429, "server_busy", "every local connection is in use (" + std::to_string(options_.max_connections) + "); retry later", "",
                            "too_many_connections"};
        const auto held = per_user_.find(uid);
        if (held != per_user_.end() && held->second >= options_.max_per_user)
            return ApiError{429, "server_busy",
                            "this user holds " + std::to_string(held->second) + " local connections, the most allowed per user; close one or retry later",
                            "", "too_many_connections"};
        return std::nullopt;
    }

    void close_connection(int fd, uid_t uid) {
        std::lock_guard lock(mutex_);
        std::erase(connection_fds_, fd);
        ::close(fd);
        --open_;
        if (--per_user_[uid] == 0) per_user_.erase(uid);
    }

    // The HELLO: the API key, when the server wants one. The connection's cache scope (server/api_keys.h), or
    // nothing (after an error reply) when the client may not go on.
    std::optional<uint32_t> greet(int fd) {
        const auto deadline = Clock::now() + std::chrono::seconds(options_.request_timeout_s);
        colibri_local_request_header h{};
        if (!read_exact(fd, &h, sizeof h, deadline)) return std::nullopt;
        if (h.magic != COLIBRI_LOCAL_MAGIC || h.version != COLIBRI_LOCAL_VERSION || h.kind != COLIBRI_LOCAL_HELLO || h.length > COLIBRI_LOCAL_MAX_KEY) {
            send_error(fd, {400, "invalid_request_error",
                            "not a colibri local hello (magic, version " + std::to_string(COLIBRI_LOCAL_VERSION) + ", kind or length)", "", ""});
            return std::nullopt;
        }
        std::string key(h.length, '\0');
        if (!read_exact(fd, key.data(), key.size(), deadline)) return std::nullopt;
        if (!keys_.required()) return 0;
        if (const uint32_t scope = keys_.scope_of_key(key); scope != 0) return scope;
        send_error(fd, {401, "invalid_request_error",
                        key.empty() ? "no API key given (colibri_client_connect_key, or COLIBRI_API_KEY)" : "incorrect API key provided", "",
                        "invalid_api_key"});
        return std::nullopt;
    }

    void serve(int fd) {
        const std::optional<uint32_t> scope = greet(fd);
        if (!scope) return;
        // The connection's own memory: the reply segment (the client may only read it) and the client page
        // (the client's to write; the server only reads it).
        const size_t data_offset = sizeof(colibri_reply_segment);
        ConnectionMemory reply, page;
        Status made = reply.create(options_.name + "-reply", data_offset + options_.ring_bytes, 0400, PROT_READ | PROT_WRITE);
        if (made) made = page.create(options_.name + "-client", 4096, 0600, PROT_READ);
        const int reply_for_client = made ? reply.open_read_only() : -1;
        if (made && reply_for_client < 0) made = error(std::string("shared memory for a connection: ") + std::strerror(errno));
        if (!made) {
            send_error(fd, {503, "server_error", made.message(), "", ""});
            return;
        }
        auto* segment = reinterpret_cast<colibri_reply_segment*>(reply.bytes());
        segment->magic = COLIBRI_LOCAL_MAGIC;
        segment->version = COLIBRI_LOCAL_VERSION;
        segment->ring_bytes = options_.ring_bytes;
        segment->data_offset = static_cast<uint32_t>(data_offset);
        RingWriter ring(segment, reply.bytes() + data_offset, options_.ring_bytes, reinterpret_cast<const colibri_client_page*>(page.bytes()));
        const int done_fd = ::eventfd(0, EFD_CLOEXEC);
        const int pass[2] = {reply_for_client, page.fd()};
        const bool greeted = done_fd >= 0 && send_reply(fd, 200, {}, pass, 2);
        ::close(reply_for_client);
        if (greeted)
            while (!stopping_ && serve_request(fd, ring, done_fd, *scope)) {
            }
        if (done_fd >= 0) ::close(done_fd);
        // A client that keeps its mapping after the connection must not keep the memory (nor learn anything
        // from it). When the server stops, its clients may still be reading their last records.
        if (!stopping_) {
            reply.release_pages();
            page.release_pages();
        }
    }

    // Waits for the next request; false when the connection stays idle past the idle timeout or the server stops.
    bool wait_for_request(int fd) {
        const auto deadline = Clock::now() + std::chrono::seconds(options_.idle_timeout_s);
        pollfd idle{fd, POLLIN, 0};
        while (!stopping_) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return false;
            const int r = ::poll(&idle, 1, static_cast<int>(std::min<int64_t>(left, 500)));
            if (r > 0) return true;
            if (r < 0 && errno != EINTR) return false;
        }
        return false;
    }

    // One request on the connection; false when the connection should close.
    bool serve_request(int fd, RingWriter& ring, int done_fd, uint32_t scope) {
        if (!wait_for_request(fd)) return false;
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
        if (h.length > options_.max_body) {
            // The body is not read: the connection closes after the answer.
            send_error(fd, {413, "invalid_request_error",
                            "the request body (" + std::to_string(h.length) + " bytes) is larger than this server accepts (--max-body " +
                                std::to_string(options_.max_body) + ")",
                            "", "request_too_large"});
            ::shutdown(fd, SHUT_WR);
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
        JobSpec& spec = std::get<ApiRequest>(parsed).spec;
        spec.cache_scope = scope;
        auto job = std::make_shared<Job>(std::move(spec), sink);
        sink->job = job;
        if (!scheduler_.submit(job))
            return send_error(fd, {429, "server_busy", "too many requests are waiting for a slot; retry later", "", "too_many_requests"});
        if (!send_reply(fd, 200)) {
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
        return keep && !sink->lost_end();
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
    ApiKeys keys_;
    int listen_fd_ = -1;
    std::mutex mutex_;
    uint32_t open_ = 0;
    std::map<uid_t, uint32_t> per_user_;
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
