// The local transport (`colibri serve --socket PATH --shm-key KEY`): requests over a Unix domain socket (mode
// 0660), reply tokens through a ring per connection in a shared-memory object (mode 0600, passed to the client
// over the socket). The protocol: server/client/colibri_local_protocol.h; the client: colibri_client.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/base/status.h"
#include "server/openai_api.h"
#include "server/scheduler.h"

namespace colibri::server {

struct LocalOptions {
    std::string socket_path;
    std::string shm_key;            // the shared-memory object is /colibri-<key> (in /dev/shm)
    uint32_t rings = 16;            // connections served at once
    uint32_t ring_bytes = 1u << 20; // per connection; a client that falls this far behind is cut off
    int request_timeout_s = 10;     // a request's header and body must arrive within this
};

class LocalServer {
public:
    LocalServer(Scheduler& scheduler, const ServedModel& served, const ApiLimits& limits, const LocalOptions& options);
    ~LocalServer();  // stops, removes the socket and the shared memory

    // Creates the socket and the shared memory and starts accepting. A socket or shared memory left by a server
    // that is gone is replaced; one in use is an error.
    Status start();
    void stop();

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace colibri::server
