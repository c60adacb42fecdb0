#include "server/http_server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <string_view>

#include "server/api_keys.h"
#include "server/http_connections.h"


namespace colibri::server {

namespace {

using nlohmann::json;

// Every path the server answers, with the one method it takes and the label /metrics counts it under. Any other
// path is 404 and counts as "other": no request can add a label.
enum class RouteKind { Health, Metrics, Models, Model, Chat, Completions };
struct Route {
    std::string_view path;  // exact, or a prefix (followed by at least one character) when `prefix`
    bool prefix;
    std::string_view method;
    std::string_view label;
    RouteKind what;
};
constexpr Route kRoutes[] = {
    {"/health", false, "GET", "/health", RouteKind::Health},
    {"/metrics", false, "GET", "/metrics", RouteKind::Metrics},
    {"/v1/models", false, "GET", "/v1/models", RouteKind::Models},
    {"/v1/models/", true, "GET", "/v1/models/:model", RouteKind::Model},
    {"/v1/chat/completions", false, "POST", "/v1/chat/completions", RouteKind::Chat},
    {"/v1/completions", false, "POST", "/v1/completions", RouteKind::Completions},
    // The same without /v1, as llama.cpp's server offers them.
    {"/chat/completions", false, "POST", "/chat/completions", RouteKind::Chat},
    {"/completions", false, "POST", "/completions", RouteKind::Completions},
};

const Route* find_route(std::string_view path) {
    for (const Route& r : kRoutes)
        if (r.prefix ? path.size() > r.path.size() && path.starts_with(r.path) : path == r.path) return &r;
    return nullptr;
}

bool method_allowed(const Route& r, const std::string& method) { return method == r.method || (r.method == "GET" && method == "HEAD"); }

// httplib's accept loop gives each socket to its task queue; this one hands it straight to the connection pool.
class InlineQueue final : public httplib::TaskQueue {
public:
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {}
};

// httplib's server with its connections in a ConnectionPool: httplib parses and answers each request, the pool
// decides which connection a worker serves next.
class GuardedServer final : public httplib::Server {
public:
    explicit GuardedServer(const ConnectionLimits& limits)
        : pool_(limits, [this](Connection& c, bool last) {
              bool closed = false;
              const bool ok = process_request(c, last, closed, nullptr);
              return ok && !closed;
          }) {
        new_task_queue = [] { return new InlineQueue; };
    }

    // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's library): a burst of
    // more concurrent connections has SYNs dropped, and those clients wait a second for the retransmission
    // (colibri-serve-bench saw 8 streams start 1 s apart). listen() again on the bound socket raises it.
    bool raise_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
    ConnectionPool& pool() { return pool_; }
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
        pool_.add(sock);
        return true;
    }
    ConnectionPool pool_;
};

// The OpenAI error for a status httplib answered by itself (no route, body too large, bad request line).
ApiError status_error(int status, const std::string& path) {
    switch (status) {
        case 404: return {404, "invalid_request_error", "no endpoint " + path.substr(0, 200) + " (see /v1/models, /v1/chat/completions, /v1/completions)", "", "not_found"};
        case 405: return {405, "invalid_request_error", "method not allowed on " + path, "", "method_not_allowed"};
        case 413: return {413, "invalid_request_error", "the request body is larger than this server accepts", "", "request_too_large"};
        case 414: return {414, "invalid_request_error", "the request URI is too long", "", ""};
        default: return {status, "invalid_request_error", "malformed HTTP request", "", ""};
    }
}

// The part of a request's body httplib has not read when a handler answers before reading it.
bool has_body(const httplib::Request& req) {
    if (req.has_header("Transfer-Encoding")) return true;
    if (req.has_header("Content-Length")) return req.get_header_value("Content-Length") != "0";
    // httplib reads such a request's body up to the end of the connection
    return req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE" || req.method == "PRI";
}

// A path as the request log shows it: printable ASCII, at most 80 bytes (it is the client's text).
std::string printable(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size() && out.size() < 80; ++i) out += s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    return out.size() < s.size() ? out + "..." : out;
}

size_t default_max_connections() {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 4096;
    // Leave descriptors for the model, the local transport and the log; at least a few connections.
    return std::clamp<size_t>(r.rlim_cur > 256 ? r.rlim_cur - 128 : r.rlim_cur / 2, 16, 16384);
}

ConnectionLimits connection_limits(const HttpOptions& o) {
    ConnectionLimits l;
    l.request_timeout_s = o.request_timeout_s;
    l.io_timeout_s = o.io_timeout_s;
    l.idle_timeout_s = o.idle_timeout_s;
    l.workers = std::max(o.connection_threads, 2u);
    l.max_connections = o.max_connections > 0 ? o.max_connections : default_max_connections();
    l.keep_alive_max = 100;
    l.max_drained = o.max_body + 65536;  // a refused body of an allowed size is read whole: its answer arrives
    return l;
}

}  // namespace

class HttpServer::Impl {
public:
    Impl(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const HttpOptions& options)
        : scheduler_(scheduler), served_(served), limits_(limits), options_(options), keys_(options.api_keys),
          server_(connection_limits(options)), seeds_(std::random_device{}()) {
        server_.set_payload_max_length(options.max_body);
        server_.set_keep_alive_timeout(options.idle_timeout_s);  // what the Keep-Alive header says
        server_.set_keep_alive_max_count(100);
        server_.set_tcp_nodelay(true);
        routes();
    }

    Result<int> bind() {
        const int port = options_.port == 0 ? server_.bind_to_any_port(options_.host) : (server_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
        if (port < 0) return error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + std::strerror(errno));
        if (!server_.raise_backlog()) return error(std::string("cannot listen with a longer backlog: ") + std::strerror(errno));
        if (Status s = server_.pool().start(); !s) return s;
        return port;
    }
    void run() {
        server_.listen_after_bind();
        server_.pool().stop();
    }
    void stop() { server_.stop_listening(); }

private:
    // Decides what it can before the body is read: the key, the route and method, the body's encoding. A request
    // answered here leaves its body unread, so its connection closes after the answer.
    httplib::Server::HandlerResponse before_body(const httplib::Request& req, httplib::Response& res) {
        const Route* route = find_route(req.path);
        auto answer = [&](const ApiError& e) {
            send_error(res, e);
            if (has_body(req))
                if (Connection* c = ConnectionPool::current()) c->close_after_response();
            return httplib::Server::HandlerResponse::Handled;
        };
        // The key first: without it, a client learns nothing, not even which paths exist.
        if (keys_.required() && !(route && route->what == RouteKind::Health)) {
            const std::string auth = req.get_header_value("Authorization");
            if (keys_.scope_of(auth) == 0)
                return answer({401, "invalid_request_error", auth.empty() ? "no API key given (send 'Authorization: Bearer <key>')" : "incorrect API key provided",
                               "", "invalid_api_key"});
        }
        if (route == nullptr) return answer(status_error(404, req.path));
        if (!method_allowed(*route, req.method)) {
            res.set_header("Allow", route->method == "GET" ? "GET, HEAD" : std::string(route->method));
            return answer({405, "invalid_request_error", req.method.substr(0, 16) + " is not allowed on " + std::string(route->label) + "; use " +
                                                              std::string(route->method), "", "method_not_allowed"});
        }
        if (route->method != "POST") {
            if (has_body(req))
                if (Connection* c = ConnectionPool::current()) c->close_after_response();  // a GET's body is never read
            return httplib::Server::HandlerResponse::Unhandled;
        }
        // gzip and deflate bodies are inflated as they are read, up to --max-body; brotli's window (up to 16 MiB
        // per request) and any other coding are refused.
        const std::string encoding = req.get_header_value("Content-Encoding");
        if (!encoding.empty() && encoding != "identity" && encoding != "gzip" && encoding != "deflate")
            return answer({415, "invalid_request_error", "Content-Encoding '" + encoding.substr(0, 32) + "' is not supported (use gzip, deflate or none)",
                           "", "unsupported_media_type"});
        if (req.is_multipart_form_data())
            return answer({415, "invalid_request_error", "the request body must be JSON, not multipart/form-data", "", "unsupported_media_type"});
        if (req.has_header("Transfer-Encoding") && req.get_header_value("Transfer-Encoding") != "chunked")
            return answer({400, "invalid_request_error", "Transfer-Encoding '" + req.get_header_value("Transfer-Encoding").substr(0, 32) +
                                                             "' is not supported (only chunked)", "", ""});
        return httplib::Server::HandlerResponse::Unhandled;
    }

    void routes() {
        server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return before_body(req, res); });
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
        server_.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
            // httplib announces keep-alive unless the client asked to close; a connection closing after an
            // answer that left the body unread must say so.
            const Connection* c = ConnectionPool::current();
            if (c == nullptr || !c->closing()) return;
            res.headers.erase("Keep-Alive");
            res.set_header("Connection", "close");
        });
        server_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            const Route* route = find_route(req.path);
            requests_.count(route ? route->label : RequestCounters::kOther, res.status);
            if (options_.log_requests)
                std::fprintf(stderr, "colibri serve: %s %s %d\n", printable(req.method).c_str(), printable(req.path).c_str(), res.status);
        });

        for (const Route& r : kRoutes) {
            const std::string pattern = std::string(r.path) + (r.prefix ? "(.+)" : "");
            if (r.method == "GET")
                server_.Get(pattern, [this, &r](const httplib::Request& req, httplib::Response& res) { answer_get(r, req, res); });
            else
                server_.Post(pattern, [this, &r](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
                    answer_post(r, req, res, reader);
                });
        }
    }

    void answer_get(const Route& r, const httplib::Request& req, httplib::Response& res) {
        switch (r.what) {
            case RouteKind::Health: return res.set_content(R"({"status":"ok"})", "application/json");
            case RouteKind::Metrics:
                return res.set_content(prometheus_text(scheduler_.stats(), requests_, server_.pool().counts(), served_.id), "text/plain; version=0.0.4");
            case RouteKind::Models: return res.set_content(dump(models_list(served_)), "application/json");
            case RouteKind::Model: {
                const json list = models_list(served_);
                if (req.matches[1] == served_.id) return res.set_content(dump(list["data"][0]), "application/json");
                return send_error(res, {404, "invalid_request_error", "the model '" + req.matches[1].str().substr(0, 200) + "' does not exist", "model",
                                        "model_not_found"});
            }
            default: return;
        }
    }

    // Reads the body through httplib, which inflates gzip and deflate as it goes, stopping at --max-body of
    // what it yields: a small compressed body cannot become a large one in memory.
    void answer_post(const Route& r, const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        std::string body;
        bool too_large = false;
        const bool read = reader([&](const char* data, size_t n) {
            if (n > options_.max_body - body.size()) {
                too_large = true;
                return false;
            }
            body.append(data, n);
            return true;
        });
        if (!read || too_large) {
            if (Connection* c = ConnectionPool::current()) c->close_after_response();
            if (too_large || res.status == 413) return send_error(res, status_error(413, req.path));
            return send_error(res, {400, "invalid_request_error",
                                    "the request body could not be read: cut short, malformed chunks or compressed data, or not within the timeout", "", ""});
        }
        const uint32_t scope = keys_.scope_of(req.get_header_value("Authorization"));
        generate(r.what == RouteKind::Chat ? Endpoint::Chat : Endpoint::Completions, body, scope, res);
    }

    static void send_error(httplib::Response& res, const ApiError& e) {
        res.status = e.status;
        res.set_content(dump(error_body(e)), "application/json");
    }

    void generate(Endpoint endpoint, const std::string& body, uint32_t scope, httplib::Response& res) {
        std::variant<ApiRequest, ApiError> parsed = [&] {
            std::lock_guard lock(seeds_mutex_);
            return parse_request(endpoint, body, served_, limits_, seeds_);
        }();
        if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
        auto request = std::make_shared<ApiRequest>(std::move(std::get<ApiRequest>(parsed)));
        request->spec.cache_scope = scope;
        auto queue = std::make_shared<JobQueue>();
        auto job = std::make_shared<Job>(request->spec, queue);
        if (!scheduler_.submit(job))
            return send_error(res, {429, "server_busy", "too many requests are waiting for a slot; retry later", "", "too_many_requests"});
        const std::string id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id_);
        auto builder = std::make_shared<ResponseBuilder>(*request, served_, id, static_cast<int64_t>(std::time(nullptr)));

        if (!request->stream) {
            std::vector<JobEvent> events;
            const Connection* connection = ConnectionPool::current();
            for (;;) {
                auto outcome = queue->take(events, std::chrono::milliseconds(100));
                for (const JobEvent& e : events) builder->add(e);
                if (!outcome) {
                    // A client that hung up while it waited: its job stops at the next step.
                    if (connection != nullptr && !connection->peer_alive()) job->cancel();
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
    ApiKeys keys_;
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
