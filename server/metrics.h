// What /metrics reports, in the Prometheus text format (version 0.0.4): requests by endpoint and status,
// tokens, queue depth, recent decode tokens/s and expert activations per layer.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/scheduler.h"

namespace colibri::server {

class RequestCounters {
public:
    void count(const std::string& endpoint, int status) {
        std::lock_guard lock(mutex_);
        ++counts_[{endpoint, status}];
    }
    std::map<std::pair<std::string, int>, uint64_t> snapshot() const {
        std::lock_guard lock(mutex_);
        return counts_;
    }

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> counts_;
};

std::string prometheus_text(const SchedulerStats& stats, const RequestCounters& requests, const std::string& model_id);

}  // namespace colibri::server
