// The local transport (`colibri serve --socket PATH`): requests over a Unix domain socket (mode 0660: the server's
// user and group may connect), reply tokens through shared memory made for each connection alone and passed to
// its client over the socket. The protocol: server/client/colibri_local_protocol.h; the client: colibri_client.h;
// the threat model: docs/SERVER.md, "Local mode".
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "server/openai_api.h"
#include "server/scheduler.h"

namespace colibri::server {

struct LocalOptions {
    std::string socket_path;
    std::string name = "colibri";    // names each connection's shared memory (memfd:NAME-reply in /proc/PID/maps)
    std::vector<std::string> api_keys;  // non-empty: a connection's HELLO must carry one; each key its own cache scope
    size_t max_body = 2u << 20;      // request bodies beyond this get 413
    uint32_t max_connections = 16;   // connections open at once, those still saying hello included
    uint32_t max_per_user = 0;       // of them, from one uid; 0: half of max_connections (at least 1)
    uint32_t ring_bytes = 1u << 20;  // per connection; a client that falls this far behind is cut off
    int request_timeout_s = 10;      // a HELLO, and a request's header and body, must arrive within this
    int idle_timeout_s = 60;         // a connection with no request for this long is closed
};

class LocalServer {
public:
    LocalServer(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const LocalOptions& options);
    ~LocalServer();  // stops and removes the socket

    // Creates the socket and starts accepting. A socket left by a server that is gone is replaced; one in use
    // is an error.
    Status start();
    void stop();

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace colibri::server
