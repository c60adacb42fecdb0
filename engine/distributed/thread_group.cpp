#include "engine/distributed/thread_group.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace colibri {

class ThreadGroup::Rank final : public Communicator {
public:
    Rank(ThreadGroup& group, uint32_t rank) : group_(group), rank_(rank) {}
    uint32_t rank() const override { return rank_; }
    uint32_t size() const override { return group_.size(); }
    bool broken() const override {
        std::lock_guard<std::mutex> lock(group_.mutex_);
        return group_.broken_;
    }
    Status allgatherv(std::span<const uint8_t> send, std::span<uint8_t> recv, std::span<const size_t> counts) override {
        if (counts.size() != size() || counts[rank_] != send.size() ||
            recv.size() != std::accumulate(counts.begin(), counts.end(), size_t(0)))
            return error("exchange: byte counts do not match the ranks");
        std::unique_lock<std::mutex> lock(group_.mutex_);
        group_.sends_[rank_] = send;
        if (!group_.barrier(lock, wait_limit_)) return lost();
        size_t at = 0;
        for (uint32_t r = 0; r < size(); ++r) {
            if (group_.sends_[r].size() != counts[r]) return error("exchange: rank " + std::to_string(r) + " sent another byte count");
            std::copy(group_.sends_[r].begin(), group_.sends_[r].end(), recv.begin() + at);
            at += counts[r];
        }
        // Nobody reuses its send buffer before every rank has copied it.
        if (!group_.barrier(lock, wait_limit_)) return lost();
        return Status::ok();
    }
    Status broadcast(std::vector<uint8_t>& bytes) override {
        std::unique_lock<std::mutex> lock(group_.mutex_);
        if (rank_ == 0) group_.shared_ = &bytes;
        if (!group_.barrier(lock, wait_limit_)) return lost();
        if (rank_ != 0) bytes = *group_.shared_;
        // Rank 0 keeps its bytes until every rank has copied them.
        if (!group_.barrier(lock, wait_limit_)) return lost();
        return Status::ok();
    }

private:
    Status lost() const { return peer_lost(); }
    ThreadGroup& group_;
    uint32_t rank_;
};

ThreadGroup::ThreadGroup(uint32_t ranks) : sends_(ranks) {
    for (uint32_t r = 0; r < ranks; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

ThreadGroup::~ThreadGroup() = default;

Communicator& ThreadGroup::rank(uint32_t r) { return *ranks_[r]; }

bool ThreadGroup::barrier(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds limit) {
    if (broken_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == ranks_.size()) {
        arrived_ = 0;
        ++generation_;
        arrived_cv_.notify_all();
        return true;
    }
    if (!arrived_cv_.wait_for(lock, limit, [&] { return generation_ != generation || broken_; })) broken_ = true;
    if (broken_) arrived_cv_.notify_all();
    return !broken_;
}

}  // namespace colibri
