// The ranks of an expert-parallel run, the one exchange the MoE step needs, and rank 0's broadcast that lets the
// other ranks follow what it does (the server's session mirror). The session talks to this interface only: MPI (mpi_communicator.cpp, built when CMake found MPI), one process alone (SoloCommunicator), or ranks that
// are threads of one process (thread_group.h, the in-process tests). Every wait is bounded: a rank that stops
// answering turns into an error within wait_limit, never a hang.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/base/status.h"

namespace colibri {

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual uint32_t rank() const = 0;
    virtual uint32_t size() const = 0;
    // Every rank's `send` bytes, concatenated in rank order into `recv`; counts[r] is rank r's byte count, which
    // every rank knows (counts.size() == size(), recv.size() == their sum, send.size() == counts[rank()]).
    // Collective: every rank calls it in the same order. An error when a peer does not take part within the wait
    // limit (stopped, killed, or following other tokens); after an error the communicator is broken for good.
    virtual Status allgatherv(std::span<const uint8_t> send, std::span<uint8_t> recv, std::span<const size_t> counts) = 0;
    // Rank 0's `bytes` to every other rank, whose `bytes` become a copy (any size). Every receiver acknowledges, so
    // rank 0's error names the ranks that did not take part within the wait limit; a receiver waits for rank 0
    // alone. Collective: every rank calls it in the same order (between allgatherv calls too); breaks as they do.
    virtual Status broadcast(std::vector<uint8_t>& bytes) = 0;
    // How long one collective may wait for its peers.
    void set_wait_limit(std::chrono::milliseconds limit) { wait_limit_ = limit; }
    std::chrono::milliseconds wait_limit() const { return wait_limit_; }
    // Whether an exchange failed (then no further collective is attempted, and MPI is not finalized).
    virtual bool broken() const = 0;

    // "rank R: another rank did not answer within 2 s (it stopped or died)": the one wording of a lost peer; with
    // the ranks known, "rank 0: rank 2 did not answer within 2 s (it stopped or died)".
    Status peer_lost(std::span<const uint32_t> lost = {}) const;

protected:
    std::chrono::milliseconds wait_limit_{60000};
};

// One process: rank 0 of 1; the exchange is a copy.
class SoloCommunicator final : public Communicator {
public:
    uint32_t rank() const override { return 0; }
    uint32_t size() const override { return 1; }
    Status allgatherv(std::span<const uint8_t> send, std::span<uint8_t> recv, std::span<const size_t> counts) override;
    Status broadcast(std::vector<uint8_t>&) override { return Status::ok(); }
    bool broken() const override { return false; }
};

// Each rank's equal-sized record, gathered into `all` (size() records in rank order).
Status allgather(Communicator& comm, std::span<const uint8_t> mine, std::span<uint8_t> all);

}  // namespace colibri
