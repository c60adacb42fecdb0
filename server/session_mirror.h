// The server across ranks (expert parallelism, docs/DISTRIBUTED.md): rank 0's scheduler runs the slots, and every
// other rank holds the same slot sessions and follows. Before each operation on a slot's session (an evaluation, a
// batched step, a check, a reset, a truncation...) rank 0 tells the others (SessionMirror), and each applies it to its
// own session (follow_slots), so that the MoE exchanges inside happen on every rank in the same order. Only rank 0
// samples; the others' logits are dropped. While rank 0 has nothing to do it sends a heartbeat, well within the
// wait limit; on shutdown it sends "stop". Without ranks the mirror does nothing.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/base/status.h"
#include "engine/core/session.h"
#include "engine/distributed/communicator.h"

namespace colibri::server {

class SessionMirror {
public:
    // comm null or of one rank: a no-op.
    explicit SessionMirror(Communicator* comm = nullptr);
    bool active() const { return comm_ != nullptr; }
    uint32_t ranks() const { return comm_ ? comm_->size() : 1; }

    // Each says what rank 0 is about to do to slot `slot`'s session. A failure is kept (lost()); later calls do nothing.
    void reset(uint32_t slot);
    void truncate(uint32_t slot, uint32_t n);
    void reserve_verify(uint32_t slot, uint32_t rows);
    void keep_verified(uint32_t slot, uint32_t keep);
    void eval(uint32_t slot, std::span<const int32_t> tokens, bool verify);  // verify: Session::verify
    struct Part {
        uint32_t slot;
        std::span<const int32_t> tokens;
        bool verify;
    };
    void eval_batch(std::span<const Part> parts);
    // Nothing to do: keeps the followers waiting (send at least every heartbeat()).
    void idle();
    // The followers stop (exit 0).
    void stop();
    std::chrono::milliseconds heartbeat() const;
    // Ok while every rank follows; else why not (a rank that did not answer, named where known). Also a failed MoE
    // exchange inside an evaluation, which breaks the communicator.
    Status lost() const;

private:
    void begin(uint32_t op, uint32_t parts);  // an Op (session_mirror.cpp)
    void part(uint32_t slot, uint32_t arg, std::span<const int32_t> tokens = {});
    void send();
    Communicator* comm_;
    std::vector<uint32_t> words_;  // the operation being written: op, parts, then per part slot, arg, count, tokens
    std::vector<uint8_t> bytes_;
    Status failure_;
};

// Every rank but 0: applies rank 0's operations to `sessions` (slot i is sessions[i]) until it says stop (ok) or
// stops answering within the communicator's wait limit (the error).
Status follow_slots(Communicator& comm, std::span<Session* const> sessions);

}  // namespace colibri::server
