#include "server/http_server.h"

#include "server/connection_pool.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>

namespace colibri::server {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// A connection's socket as httplib reads and writes it, with one addition: a request must arrive whole within
// a deadline. httplib's own timeout is per read, so a client that sends a byte every few seconds (slowloris)
// would hold a connection thread for ever; here every read after the deadline fails and the connection closes.
class DeadlineStream final : public httplib::Stream {
public:
    DeadlineStream(int sock, int io_timeout_s) : sock_(sock), io_timeout_ms_(io_timeout_s * 1000) {}

    void start_request(int timeout_s) { deadline_ = Clock::now() + std::chrono::seconds(timeout_s); }
    // Waits for the first byte of the next request on a kept-alive connection.
    bool wait_for_request(int idle_s) { return begin_ < end_ || wait(POLLIN, idle_s * 1000) > 0; }

    bool is_readable() const override { return begin_ < end_ || wait(POLLIN, std::min(io_timeout_ms_, remaining_ms())) > 0; }
    bool is_writable() const override { return wait(POLLOUT, io_timeout_ms_) > 0 && alive(); }

    ssize_t read(char* ptr, size_t size) override {
        if (begin_ == end_) {
            const int ms = remaining_ms();
            if (ms <= 0 || wait(POLLIN, std::min(io_timeout_ms_, ms)) <= 0) return -1;
            ssize_t n;
            do n = ::recv(sock_, buffer_, sizeof buffer_, 0);
            while (n < 0 && errno == EINTR);
            if (n <= 0) return n;
            begin_ = 0;
            end_ = static_cast<size_t>(n);
        }
        const size_t n = std::min(size, end_ - begin_);
        std::memcpy(ptr, buffer_ + begin_, n);
        begin_ += n;
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char* ptr, size_t size) override {
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
    void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
    socket_t socket() const override { return sock_; }
    // The peer has not closed its end: a whole (not streamed) reply's handler asks while it waits.
    bool peer_alive() const { return alive(); }

private:
    int remaining_ms() const {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
        return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
    }
    int wait(short events, int ms) const {
        pollfd p{sock_, events, 0};
        int r;
        do r = ::poll(&p, 1, ms);
        while (r < 0 && errno == EINTR);
        return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) ? r : (r > 0 ? 0 : r);
    }
    // The peer has not closed its end (a stream to a client that left is cancelled).
    bool alive() const {
        if (begin_ < end_) return true;
        pollfd p{sock_, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) return true;
        char c;
        return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
    }
    template <typename F>
    void address(F get, std::string& ip, int& port) const {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        ip.clear();
        port = 0;
        if (get(sock_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
        char host[64] = {};
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

    int sock_;
    int io_timeout_ms_;
    Clock::time_point deadline_ = Clock::now();
    char buffer_[4096];
    size_t begin_ = 0, end_ = 0;
};

// The connection the current thread serves (handlers run on their connection's thread).
thread_local const DeadlineStream* t_connection = nullptr;

// httplib's server with DeadlineStream connections: the keep-alive loop is httplib's, the stream is ours.
class GuardedServer final : public httplib::Server {
public:
    int request_timeout_s = 10, io_timeout_s = 10, idle_timeout_s = 5;

    // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library): a burst of
    // more concurrent connections has SYNs dropped, and those clients wait a second for the retransmission
    // (colibri-serve-bench saw 8 streams start 1 s apart). listen() again on the bound socket raises it.
    bool raise_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
    // httplib's stop() does nothing until listen() has begun, so a SIGTERM right after bind() was lost and the
    // server ran on. Taking the socket away works at any time: listen() returns at once, or never starts.
    void stop_listening() {
        const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
        if (sock == INVALID_SOCKET) return;
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
    }

private:
    bool process_and_close_socket(socket_t sock) override {
        DeadlineStream stream(sock, io_timeout_s);
        t_connection = &stream;
        bool ok = true;
        for (size_t left = keep_alive_max_count_; left > 0 && ok && is_running(); --left) {
            if (!stream.wait_for_request(idle_timeout_s)) break;
            stream.start_request(request_timeout_s);
            bool closed = false;
            ok = process_request(stream, left == 1, closed, nullptr);
            if (closed) break;
        }
        t_connection = nullptr;
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
        return ok;
    }
};

bool constant_time_equal(const std::string& a, const std::string& b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
    return diff == 0;
}

// The OpenAI error for a status httplib answered by itself (no route, body too large, bad request line).
ApiError status_error(int status, const std::string& path) {
    switch (status) {
        case 404: return {404, "invalid_request_error", "no endpoint " + path + " (see /v1/models, /v1/chat/completions, /v1/completions)", "", "not_found"};
        case 405: return {405, "invalid_request_error", "method not allowed on " + path, "", "method_not_allowed"};
        case 413: return {413, "invalid_request_error", "the request body is larger than this server accepts", "", "request_too_large"};
        case 414: return {414, "invalid_request_error", "the request URI is too long", "", ""};
        default: return {status, "invalid_request_error", "malformed HTTP request", "", ""};
    }
}

}  // namespace

class HttpServer::Impl {
public:
    Impl(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const HttpOptions& options)
        : scheduler_(scheduler), served_(served), limits_(limits), options_(options), seeds_(std::random_device{}()) {
        server_.request_timeout_s = options.request_timeout_s;
        server_.io_timeout_s = options.io_timeout_s;
        server_.idle_timeout_s = options.idle_timeout_s;
        // The threads bind() started: httplib takes them over (and stops them) when it listens.
        server_.new_task_queue = [this] { return connections_.release(); };
        server_.set_payload_max_length(options.max_body);
        server_.set_read_timeout(options.io_timeout_s);
        server_.set_write_timeout(options.io_timeout_s);
        server_.set_keep_alive_timeout(options.idle_timeout_s);
        server_.set_keep_alive_max_count(100);
        server_.set_tcp_nodelay(true);
        routes();
    }

    Result<int> bind() {
        const int port = options_.port == 0 ? server_.bind_to_any_port(options_.host) : (server_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
        if (port < 0) return error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + std::strerror(errno));
        if (!server_.raise_backlog()) return error(std::string("cannot listen with a longer backlog: ") + std::strerror(errno));
        auto pool = ConnectionPool::start(std::max(options_.connection_threads, 2u));
        if (!pool) return pool.status();
        connections_ = std::move(pool.value());
        return port;
    }
    void run() {
        if (connections_) server_.listen_after_bind();  // else bind() failed: nothing to serve
    }
    void stop() { server_.stop_listening(); }

private:
    void routes() {
        server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
            const std::string auth = req.get_header_value("Authorization");
            const std::string want = "Bearer " + options_.api_key;
            if (constant_time_equal(auth, want)) return httplib::Server::HandlerResponse::Unhandled;
            send_error(res, {401, "invalid_request_error",
                             auth.empty() ? "no API key given (send 'Authorization: Bearer <key>')" : "incorrect API key provided", "",
                             "invalid_api_key"});
            return httplib::Server::HandlerResponse::Handled;
        });
        server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (res.body.empty()) send_error(res, status_error(res.status, req.path));
        });
        server_.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
            std::string what = "internal error";
            try {
                if (e) std::rethrow_exception(e);
            } catch (const std::bad_alloc&) {
                what = "out of memory";
            } catch (const std::exception& x) {
                what = x.what();
            } catch (...) {
            }
            send_error(res, {500, "server_error", what, "", ""});
        });
        server_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            requests_.count(req.path.size() > 64 ? "other" : req.path, res.status);
            if (options_.log_requests) std::fprintf(stderr, "colibri serve: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
        });

        server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"status":"ok"})", "application/json");
        });
        server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(prometheus_text(scheduler_.stats(), requests_, served_.id), "text/plain; version=0.0.4");
        });
        server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(dump(models_list(served_)), "application/json");
        });
        server_.Get("/v1/models/(.*)", [this](const httplib::Request& req, httplib::Response& res) {
            const json list = models_list(served_);
            if (req.matches[1] == served_.id) res.set_content(dump(list["data"][0]), "application/json");
            else send_error(res, {404, "invalid_request_error", "the model '" + req.matches[1].str() + "' does not exist", "model", "model_not_found"});
        });
        server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::Chat, req, res); });
        server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::Completions, req, res); });
        // The same paths without /v1, as llama.cpp's server offers them.
        server_.Post("/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::Chat, req, res); });
        server_.Post("/completions", [this](const httplib::Request& req, httplib::Response& res) { generate(Endpoint::Completions, req, res); });
    }

    static void send_error(httplib::Response& res, const ApiError& e) {
        res.status = e.status;
        res.set_content(dump(error_body(e)), "application/json");
    }

    void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
        std::variant<ApiRequest, ApiError> parsed = [&] {
            std::lock_guard lock(seeds_mutex_);
            return parse_request(endpoint, req.body, served_, limits_, seeds_);
        }();
        if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
        auto request = std::make_shared<ApiRequest>(std::move(std::get<ApiRequest>(parsed)));
        auto queue = std::make_shared<JobQueue>();
        auto job = std::make_shared<Job>(request->spec, queue);
        if (!scheduler_.submit(job))
            return send_error(res, {429, "server_busy", "too many requests are waiting for a slot; retry later", "", "too_many_requests"});
        const std::string id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
        auto builder = std::make_shared<ResponseBuilder>(*request, served_, id, static_cast<int64_t>(std::time(nullptr)));

        if (!request->stream) {
            std::vector<JobEvent> events;
            for (;;) {
                auto outcome = queue->take(events, std::chrono::milliseconds(100));
                for (const JobEvent& e : events) builder->add(e);
                if (!outcome) {
                    // A client that hung up while it waited: its job stops at the next step.
                    if (t_connection != nullptr && !t_connection->peer_alive()) job->cancel();
                    continue;
                }
                if (!outcome->error.empty()) return send_error(res, {500, "server_error", outcome->error, "", ""});
                return res.set_content(dump(builder->whole(*outcome)), "application/json");
            }
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        res.set_chunked_content_provider(
            "text/event-stream",
            [request, queue, job, builder, started = false, events = std::vector<JobEvent>()](size_t, httplib::DataSink& sink) mutable {
                auto send = [&](const json& chunk) {
                    const std::string line = "data: " + dump(chunk) + "\n\n";
                    return sink.write(line.data(), line.size());
                };
                if (!started) {
                    started = true;
                    for (const json& c : builder->start_chunks())
                        if (!send(c)) return job->cancel(), false;
                }
                auto outcome = queue->take(events, std::chrono::milliseconds(100));
                for (const JobEvent& e : events)
                    for (const json& c : builder->event_chunks(e))
                        if (!send(c)) return job->cancel(), false;
                if (!outcome) {
                    // Nothing new: make sure the client is still there, else the job stops at its next step.
                    if (!sink.is_writable()) return job->cancel(), false;
                    return true;
                }
                if (!outcome->error.empty()) {
                    send(error_body({500, "server_error", outcome->error, "", ""}));
                } else {
                    for (const json& c : builder->end_chunks(*outcome))
                        if (!send(c)) return false;
                }
                static const char done[] = "data: [DONE]\n\n";
                sink.write(done, sizeof done - 1);
                sink.done();
                return true;
            },
            [job](bool success) {
                if (!success) job->cancel();  // the connection broke before the end
            });
    }

    Scheduler& scheduler_;
    const ServedModel& served_;
    ApiLimits limits_;
    HttpOptions options_;
    std::unique_ptr<ConnectionPool> connections_;  // started by bind(), handed to httplib by run()
    GuardedServer server_;
    RequestCounters requests_;
    std::mutex seeds_mutex_;
    std::mt19937_64 seeds_;
    std::atomic<uint64_t> next_id_{0};
};

HttpServer::HttpServer(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const HttpOptions& options)
    : impl_(std::make_unique<Impl>(scheduler, served, limits, options)) {}
HttpServer::~HttpServer() = default;
Result<int> HttpServer::bind() { return impl_->bind(); }
void HttpServer::run() { impl_->run(); }
void HttpServer::stop() { impl_->stop(); }

}  // namespace colibri::server
