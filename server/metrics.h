// What /metrics reports, in the Prometheus text format (version 0.0.4): requests by endpoint and status,
// tokens, queue depth, recent decode tokens/s, connections and expert activations per layer.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "server/scheduler.h"

namespace colibri::server {

// HTTP requests answered, by route and status. The routes are the server's fixed set (any other path is one
// "other" label), so no request can add a label: the counters stay as small as the server's routes and statuses.
class RequestCounters {
public:
    static constexpr std::string_view kOther = "other";
    // `route`: one of the server's route labels, or kOther (the caller folds unknown paths).
    void count(std::string_view route, int status) {
        std::lock_guard lock(mutex_);
        ++counts_[{std::string(route), status}];
    }
    std::map<std::pair<std::string, int>, uint64_t> snapshot() const {
        std::lock_guard lock(mutex_);
        return counts_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> counts_;
};

// The HTTP front end's connections (server/http_connections.h), as /metrics reports them.
struct ConnectionStats {
    size_t waiting = 0;   // open, no request under way (idle, or a request head still arriving)
    size_t queued = 0;    // a request arrived whole, waiting for a worker
    size_t serving = 0;   // a worker answers it now
    uint64_t evicted = 0, timed_out = 0;  // closed to make room at the connection cap; closed at a deadline
};

std::string prometheus_text(const SchedulerStats& stats, const RequestCounters& requests, const ConnectionStats& connections,
                            const std::string& model_id);

}  // namespace colibri::server
