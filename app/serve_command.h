// `colibri serve`: the OpenAI-compatible HTTP server and the local socket + shared-memory transport over the
// batch scheduler (server/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/model_args.h"

namespace colibri::cli {

struct ServeArgs {
    tools::ModelArgs model;            // -m, -t, -c (per slot) and the RAM budget options
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
    size_t max_body = 2u << 20;
    int timeout_s = 10;
    std::vector<std::string> aliases;  // other names "model" may use
    bool quiet = false;                // no line per request
};

int cmd_serve(ServeArgs args);

}  // namespace colibri::cli
