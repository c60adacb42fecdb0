// The OpenAI-compatible HTTP front end (cpp-httplib): /v1/models, /v1/chat/completions, /v1/completions (whole or
// streamed as server-sent events), /health and /metrics. Every malformed request gets a 4xx with an OpenAI error
// body; bodies, tokens and waiting requests are bounded; a client reading or sending too slowly is cut off.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/scheduler.h"

namespace colibri::server {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                    // 0: any free port (bind() says which)
    // Non-empty: every endpoint but /health wants "Authorization: Bearer <one of them>"; each key is its own
    // cache scope (server/api_keys.h).
    std::vector<std::string> api_keys;
    size_t max_body = 2u << 20;         // request bodies beyond this, as sent or decompressed, get 413
    int request_timeout_s = 10;         // a request's line, headers and body must arrive within this
    int io_timeout_s = 10;              // one read or write may wait this long (a client that stops reading)
    int idle_timeout_s = 5;             // a connection with no request under way closes after this
    unsigned connection_threads = 64;   // requests answered at once (streams hold one each)
    size_t max_connections = 0;         // open at once; 0: from the process's descriptor limit
    bool log_requests = true;           // one line per request on stderr
};

class HttpServer {
public:
    HttpServer(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const HttpOptions& options);
    ~HttpServer();

    // Binds the listening socket; returns the port (useful with port 0).
    Result<int> bind();
    // Serves until stop(); call after bind().
    void run();
    void stop();

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace colibri::server
