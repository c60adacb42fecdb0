// Ranks that are threads of one process, exchanging through shared memory: expert parallelism tested without MPI
// (every rank's session in its own thread, each with its own mapping of the file). A rank that stops calling
// makes the others' exchanges fail after the wait limit, as a dead MPI rank does.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/distributed/communicator.h"

namespace colibri {

class ThreadGroup {
public:
    explicit ThreadGroup(uint32_t ranks);
    ~ThreadGroup();
    // Rank r's communicator; each is used by one thread.
    Communicator& rank(uint32_t r);
    uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }

private:
    class Rank;
    // Waits until every rank arrived (or the limit passed: then the group is broken).
    bool barrier(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds limit);
    std::mutex mutex_;
    std::condition_variable arrived_cv_;
    uint32_t arrived_ = 0;
    uint64_t generation_ = 0;
    bool broken_ = false;
    std::vector<std::span<const uint8_t>> sends_;
    const std::vector<uint8_t>* shared_ = nullptr;  // rank 0's bytes in a broadcast
    std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace colibri
