// A session across ranks (expert parallelism, docs/DISTRIBUTED.md): rank 0 drives its sessions, and every other rank
// holds the same sessions and follows. A session given a mirror (Session::set_mirror) tells it each operation before
// doing it (an evaluation, a batched step, a check, a reset, a truncation...); the mirror sends it to the other ranks,
// which apply it to their own sessions (follow_slots, engine/core/session_follow.h), so that the MoE exchanges inside
// happen on every rank in the same order. Only rank 0 samples; the others' logits are dropped. While rank 0 has
// nothing to do it sends a heartbeat, well within the wait limit (idle(), or a thread of its own: start_heartbeat);
// at the end it sends "stop". The server's scheduler (slot i: its i-th session), `colibri chat` and the C API (slot
// 0) use it. Without ranks the mirror does nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/base/status.h"
#include "engine/distributed/communicator.h"

namespace colibri {

// An operation travels as 32-bit words: the op, its parts, then per part the slot, one argument (a count, a router,
// or whether it is a check) and the tokens with their count.
enum class MirrorOp : uint32_t { Idle, Stop, Reset, Truncate, ReserveVerify, KeepVerified, SetRouter, Eval, EvalBatch };

class SessionMirror {
public:
    // comm null or of one rank: a no-op.
    explicit SessionMirror(Communicator* comm = nullptr);
    ~SessionMirror();  // ends the heartbeat thread (it sends no stop)
    SessionMirror(const SessionMirror&) = delete;
    SessionMirror& operator=(const SessionMirror&) = delete;
    bool active() const { return comm_ != nullptr; }
    uint32_t ranks() const { return comm_ ? comm_->size() : 1; }

    // Held by rank 0 from telling an operation to its end (the session's exchanges included): whoever else would
    // use the communicator meanwhile (the heartbeat) waits. Recursive: the operations below take it too.
    std::unique_lock<std::recursive_mutex> hold();

    // Each says what rank 0 is about to do to slot `slot`'s session (the Session calls them). Returns lost(): a
    // failure is kept, and later calls send nothing.
    Status reset(uint32_t slot);
    Status truncate(uint32_t slot, uint32_t n);
    Status reserve_verify(uint32_t slot, uint32_t rows);
    Status keep_verified(uint32_t slot, uint32_t keep);
    Status set_router(uint32_t slot, uint32_t kind);  // a RouterKind
    Status eval(uint32_t slot, std::span<const int32_t> tokens, bool verify);  // verify: Session::verify
    struct Part {
        uint32_t slot;
        std::span<const int32_t> tokens;
        bool verify;
    };
    Status eval_batch(std::span<const Part> parts);
    // Nothing to do: keeps the followers waiting (send at least every heartbeat()).
    Status idle();
    // The followers stop (exit 0); ends the heartbeat thread first. Nothing is sent after it.
    Status stop();
    std::chrono::milliseconds heartbeat() const;
    // A thread that sends idle() whenever nothing was sent for heartbeat(): for a driver that may wait for longer
    // than the wait limit between operations (a chat waiting for its user, a C program between calls). When a rank
    // stops answering it runs `on_lost` once (on that thread, the lock not held) and ends.
    Status start_heartbeat(std::function<void()> on_lost = {});
    // Ok while every rank follows; else why not (a rank that did not answer, named where known). Also a failed MoE
    // exchange inside an evaluation, which breaks the communicator.
    Status lost() const;

private:
    void begin(MirrorOp op, uint32_t parts);
    void part(uint32_t slot, uint32_t arg, std::span<const int32_t> tokens = {});
    Status send();
    Status one(MirrorOp op, uint32_t slot, uint32_t arg);
    void end_heartbeat();
    void beat(std::function<void()> on_lost);  // the heartbeat thread
    Communicator* comm_;
    mutable std::recursive_mutex mutex_;  // the communicator, words_, bytes_, failure_, stopped_
    std::vector<uint32_t> words_;  // the operation being written: op, parts, then per part slot, arg, count, tokens
    std::vector<uint8_t> bytes_;
    Status failure_;
    bool stopped_ = false;
    std::atomic<int64_t> last_sent_{0};  // steady_clock nanoseconds of the last send
    std::thread heartbeat_;
    std::mutex beat_mutex_;
    std::condition_variable beat_wake_;
    bool beat_stop_ = false;  // guarded by beat_mutex_
};

}  // namespace colibri
