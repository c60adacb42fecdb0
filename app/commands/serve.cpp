// `colibri serve`: the OpenAI-compatible HTTP server and the local socket + shared-memory transport over the
// batch scheduler (server/).
#include "command.h"

#include <signal.h>
#include <sys/stat.h>

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#include "engine/base/thread_start.h"
#include "engine/core/model.h"
#include "engine/core/open_model.h"
#include "model_options.h"
#include "tools/model_args.h"
#include "server/http_server.h"
#include "server/local_server.h"
#include "server/scheduler.h"

namespace colibri::cli {

namespace {

struct ServeArgs {
    tools::ModelArgs model;            // -m, -t, -c (per slot), the RAM budget options, --placement and --rank-timeout
    std::string host = "127.0.0.1";    // HOST or HOST:PORT ([::1]:PORT for IPv6)
    int port = -1;                     // -1: from --host, else 8080; 0: any free port
    uint32_t slots = 4;
    std::vector<std::string> api_keys;  // also COLIBRI_API_KEY; each its own cache scope
    bool share_prefix_cache = false;    // a cached prompt prefix serves every key
    std::string socket_path;           // local mode
    std::string shm_key;               // local mode: names the connections' shared memory (optional)
    uint32_t socket_connections = 0;   // local connections open at once; 0: max(16, slots + max_queue)
    uint32_t socket_per_user = 0;      // of them, from one uid; 0: half of socket_connections
    int socket_idle_s = 60;            // a local connection idle this long is closed
    uint32_t max_queue = 64;
    uint32_t max_tokens = 0;           // cap per request; 0: the context
    std::string speculate = "off";  // a request's "speculate" when it names none
    size_t max_body = 2u << 20;
    int timeout_s = 10;
    std::vector<std::string> aliases;  // other names "model" may use
    bool quiet = false;                // no line per request
};

int fail(const std::string& why) { return cli::fail("serve", why); }

// "HOST", "HOST:PORT" or "[V6]:PORT" into host and port (the port stays as it is when not given).
bool split_host(const std::string& text, std::string& host, int& port) {
    std::string h = text, p;
    if (!h.empty() && h[0] == '[') {
        const size_t close = h.find(']');
        if (close == std::string::npos) return false;
        if (close + 1 < h.size()) {
            if (h[close + 1] != ':') return false;
            p = h.substr(close + 2);
        }
        h = h.substr(1, close - 1);
    } else if (std::count(h.begin(), h.end(), ':') == 1) {
        p = h.substr(h.find(':') + 1);
        h = h.substr(0, h.find(':'));
    }
    if (h.empty()) return false;
    host = h;
    if (!p.empty()) {
        char* end = nullptr;
        const long v = std::strtol(p.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > 65535) return false;
        port = static_cast<int>(v);
    }
    return true;
}

// The name clients give as "model": the file's name without .bin / .bin.zst.
std::string model_id(const std::string& path) {
    std::string name = std::filesystem::path(path).filename().string();
    for (const char* suffix : {".zst", ".bin"})
        if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) name.resize(name.size() - std::strlen(suffix));
    return name.empty() ? "model" : name;
}

// SIGINT and SIGTERM, blocked in every thread started after start(), are taken by one thread that runs the stop
// action: while the server starts there is none yet and the signal is remembered (on_signal() then says so), so
// a signal is honoured at any time; before start() they keep their default action and end the process.
class StopSignals {
public:
    StopSignals() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
    }
    ~StopSignals() {
        if (!thread_.joinable()) return;
        {
            std::lock_guard lock(mutex_);
            done_ = true;
        }
        pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait
        thread_.join();
    }

    Status start() {
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);
        try {
            thread_ = std::thread([this] { wait(); });
        } catch (const std::system_error& e) {
            pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);  // a signal that came meanwhile ends the process now
            return error(thread_start_failure("the signal thread", e));
        }
        return Status::ok();
    }
    // Stops as the first signal does, from any thread (a lost rank): runs the stop action, or has on_signal() say so.
    void stop_now() {
        std::lock_guard lock(mutex_);
        if (signalled_) return;
        signalled_ = true;
        if (action_) action_();
    }
    // Runs `stop` on the next signal; false (and nothing set) when one has come already.
    bool on_signal(std::function<void()> stop) {
        std::lock_guard lock(mutex_);
        if (signalled_) {
            action_ = nullptr;
            return false;
        }
        action_ = std::move(stop);
        return true;
    }

private:
    // The first signal stops the server gracefully; a second one (a stop that takes too long) ends it at once.
    void wait() {
        for (;;) {
            int sig = 0;
            if (sigwait(&set_, &sig) != 0) continue;
            std::lock_guard lock(mutex_);
            if (done_) return;
            if (signalled_) {
                std::fputs("colibri serve: second signal: stopping at once\n", stderr);
                std::_Exit(1);
            }
            signalled_ = true;
            if (action_) action_();
        }
    }

    sigset_t set_;
    std::mutex mutex_;
    bool signalled_ = false, done_ = false;
    std::function<void()> action_;
    std::thread thread_;
};

// A rank other than 0 under mpirun: no server; the same slots as rank 0's scheduler, following it until it says stop.
// Its first SIGINT or SIGTERM (mpirun passes them on to every rank) is taken and does nothing: rank 0 stops the
// others once it has answered its requests.
int follow(const Model& model, const server::SchedulerOptions& so) {
    try {
        if (Status s = server::follow_scheduler(model, so); !s) return fail(s.message());
    } catch (const std::system_error& e) {
        return fail(thread_start_failure("the engine's threads", e));
    }
    return 0;
}

int cmd_serve(ServeArgs a) {
    int port = a.port;
    std::string host;
    if (!split_host(a.host, host, port)) return fail("--host '" + a.host + "' is not HOST, HOST:PORT or [IPV6]:PORT");
    if (port < 0) port = 8080;
    if (a.socket_path.empty() && !a.shm_key.empty()) return fail("--shm-key names the local mode's memory: it needs --socket");
    if (a.slots == 0 || a.slots > 256) return fail("--slots must be between 1 and 256");
    if (a.socket_connections > 4096) return fail("--socket-connections must be between 1 and 4096");
    const uint32_t socket_connections = a.socket_connections ? a.socket_connections : std::max(16u, a.slots + a.max_queue);
    if (a.socket_per_user > socket_connections) return fail("--socket-per-user must not exceed --socket-connections");
    if (a.socket_idle_s < 1) return fail("--socket-idle must be at least 1 second");
    if (a.api_keys.empty())
        if (const char* k = std::getenv("COLIBRI_API_KEY"); k != nullptr && *k != '\0') a.api_keys.push_back(k);
    for (const std::string& k : a.api_keys)
        if (k.empty()) return fail("--api-key must not be empty");

    signal(SIGPIPE, SIG_IGN);

    auto speculate = parse_speculate_mode(a.speculate);
    if (!speculate) return fail(speculate.message());
    // The signals are blocked before MPI starts its threads (they would take a SIGTERM and end the process at once).
    StopSignals stop;
    if (Status s = stop.start(); !s) return fail(s.message());
    // Under mpirun every rank opens the model and joins the others (engine/core/open_model.h); the scheduler starts
    // the pool and one session per slot.
    auto opened = load(a.model, false);
    if (!opened) return fail(opened.message());
    Communicator* ranks = opened->comm && opened->comm->size() > 1 ? opened->comm.get() : nullptr;
    // What the model lacks first ("no multi-token-prediction head"), then what the server does not do yet.
    if (auto drafter = make_drafter(speculate.value(), *opened->model); !drafter) return fail(drafter.message());
    if (const std::string p = server::server_speculate_problem(speculate.value()); !p.empty()) return fail(p);
    server::SchedulerOptions so;
    so.slots = a.slots;
    so.context = a.model.context;
    so.threads = a.model.threads;
    so.max_queue = a.max_queue;
    so.share_cache_across_scopes = a.share_prefix_cache;
    so.ranks = ranks;
    if (ranks && ranks->rank() != 0) return follow(*opened->model, so);
    server::ServedModel served;
    served.model = opened->model.get();
    served.id = model_id(a.model.path);
    served.aliases = a.aliases;
    struct stat st{};
    if (::stat(a.model.path.c_str(), &st) == 0) served.created = st.st_mtime;

    // Every thread starts before "listening" is printed: a limit on threads is an error here, not a server that
    // accepts connections and never answers.
    try {
        so.on_ranks_lost = [&stop] { stop.stop_now(); };  // the server stops, and says why below
        server::Scheduler scheduler(*served.model, so);
        served.context = scheduler.context();
        server::ApiLimits limits;
        limits.context = scheduler.context();
        limits.max_tokens = a.max_tokens;
        limits.speculate = speculate.value();

        server::HttpOptions ho;
        ho.host = host;
        ho.port = port;
        ho.api_keys = a.api_keys;
        ho.max_body = a.max_body;
        ho.request_timeout_s = a.timeout_s;
        ho.io_timeout_s = a.timeout_s;
        ho.log_requests = !a.quiet;
        ho.connection_threads = std::max(64u, 2 * (a.slots + a.max_queue));
        server::HttpServer http(scheduler, served, limits, ho);
        auto bound = http.bind();
        if (!bound) return fail(bound.message());
        std::unique_ptr<server::LocalServer> local;
        if (!a.socket_path.empty()) {
            server::LocalOptions lo;
            lo.socket_path = a.socket_path;
            if (!a.shm_key.empty()) lo.name = a.shm_key;
            lo.api_keys = a.api_keys;
            lo.max_body = a.max_body;
            lo.request_timeout_s = a.timeout_s;
            lo.idle_timeout_s = a.socket_idle_s;
            lo.max_connections = socket_connections;
            lo.max_per_user = a.socket_per_user;
            server::ApiLimits local_limits = limits;
            local_limits.require_model = false;
            local = std::make_unique<server::LocalServer>(scheduler, served, local_limits, lo);
            if (Status s = local->start(); !s) return fail(s.message());
        }
        if (!stop.on_signal([&http] { http.stop(); })) {  // signalled (or a rank lost) while starting
            if (local) local->stop();
            if (Status gone = scheduler.lost(); !gone) return fail(gone.message());
            std::fprintf(stderr, "colibri serve: stopped\n");
            return 0;
        }
        if (const ExpertCache* c = served.model->expert_cache())
            std::fprintf(stderr, "colibri serve: expert cache: %s, %u slots per layer within %llu bytes (--ram-budget)\n",
                         cache_policy_name(c->policy()), c->slots_per_layer(), static_cast<unsigned long long>(c->budget()));
        const bool v6 = host.find(':') != std::string::npos;
        const std::string spread = ranks ? ", experts over " + std::to_string(ranks->size()) + " ranks" : "";
        std::fprintf(stderr, "colibri serve: %s (%s), %u slots of %u tokens%s, listening on http://%s%s%s:%d%s\n", served.id.c_str(),
                     format::family_name(served.model->family()), a.slots, scheduler.context(), spread.c_str(), v6 ? "[" : "",
                     host.c_str(), v6 ? "]" : "", bound.value(), a.api_keys.empty() ? "" : " (API key required)");
        if (local)
            std::fprintf(stderr, "colibri serve: local mode on %s (mode 0660)%s\n", a.socket_path.c_str(),
                         a.api_keys.empty() ? "" : " (API key required)");
        struct Detach {  // http goes before this scope ends: a late signal must not reach it
            StopSignals& stop;
            ~Detach() { stop.on_signal({}); }
        } detach{stop};
        http.run();
        if (local) local->stop();
        // A rank that stopped answering ended the server: one line, and a non-zero exit.
        if (Status gone = scheduler.lost(); !gone) return fail(gone.message());
    } catch (const std::system_error& e) {
        return fail(thread_start_failure("the server's threads", e));
    }
    std::fprintf(stderr, "colibri serve: stopped\n");
    return 0;
}

class Serve final : public Command {
public:
    explicit Serve(CLI::App& app) {
        sub_ = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching, and a local socket + shared-memory mode (docs/SERVER.md)");
        ServeArgs& a = args_;
        sub_->add_option("-m,--model", a.model.path, "model file (.bin)")->required();
        sub_->add_option("-t,--threads", a.model.threads, "worker threads (default: all cores)");
        sub_->add_option("-c,--context", a.model.context, "context per slot in tokens (default: min(model, 4096))");
        add_budget_args(sub_, a.model);
        add_rank_args(sub_, a.model);
        sub_->add_option("--host", a.host, "address to listen on, HOST or HOST:PORT (default 127.0.0.1:8080)");
        sub_->add_option("--port", a.port, "port (default 8080; 0 picks a free one)");
        sub_->add_option("--slots", a.slots, "sequences decoded together, each with its own KV cache (default 4)");
        sub_->add_option("--api-key", a.api_keys, "require 'Authorization: Bearer KEY' (or set COLIBRI_API_KEY); repeat for several clients, each with its own prefix cache");
        sub_->add_flag("--share-prefix-cache", a.share_prefix_cache, "a prompt prefix cached for one API key also serves the others (default: per key)");
        sub_->add_option("--socket", a.socket_path, "local mode: Unix socket path (mode 0660: this user and group)");
        sub_->add_option("--shm-key", a.shm_key, "local mode: names the connections' shared memory (memfd:KEY-reply; optional)");
        sub_->add_option("--socket-connections", a.socket_connections, "local mode: connections open at once (default: max(16, slots + max-queue))");
        sub_->add_option("--socket-per-user", a.socket_per_user, "local mode: connections one uid may hold (default: half of --socket-connections)");
        sub_->add_option("--socket-idle", a.socket_idle_s, "local mode: seconds a connection may stay idle before it is closed (default 60)");
        sub_->add_option("--max-queue", a.max_queue, "requests waiting for a slot before 429 (default 64)");
        sub_->add_option("--max-tokens", a.max_tokens, "most tokens one request may generate (default: the context)");
        add_speculate_arg(sub_, a.speculate);
        sub_->add_option("--max-body", a.max_body, "largest request body in bytes (default 2 MiB)");
        sub_->add_option("--timeout", a.timeout_s, "seconds a request may take to arrive, and one read or write to wait (default 10)");
        sub_->add_option("--alias", a.aliases, "another name clients may give as \"model\"");
        sub_->add_flag("-q,--quiet", a.quiet, "no line per request");
        sub_->footer("Under mpirun -np N (expert parallelism, docs/DISTRIBUTED.md): rank 0 serves and the other ranks, each "
                     "holding its share of the experts, follow every step of its slots; replies are one process's. A rank "
                     "that stops answering for --rank-timeout seconds stops the server (exit 1, one line naming it); SIGINT "
                     "or SIGTERM to rank 0 stops every rank.");
    }
    int run() override { return cmd_serve(args_); }

private:
    ServeArgs args_;
};

}  // namespace

std::unique_ptr<Command> serve_command(CLI::App& app) { return std::make_unique<Serve>(app); }

}  // namespace colibri::cli
