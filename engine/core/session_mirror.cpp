#include "engine/core/session_mirror.h"

#include <algorithm>
#include <cstring>
#include <system_error>

namespace colibri {

namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SessionMirror::SessionMirror(Communicator* comm) : comm_(comm && comm->size() > 1 ? comm : nullptr) {}

SessionMirror::~SessionMirror() { end_heartbeat(); }

std::unique_lock<std::recursive_mutex> SessionMirror::hold() { return std::unique_lock<std::recursive_mutex>(mutex_); }

void SessionMirror::begin(MirrorOp op, uint32_t parts) {
    words_.clear();
    words_.push_back(static_cast<uint32_t>(op));
    words_.push_back(parts);
}

void SessionMirror::part(uint32_t slot, uint32_t arg, std::span<const int32_t> tokens) {
    words_.push_back(slot);
    words_.push_back(arg);
    words_.push_back(static_cast<uint32_t>(tokens.size()));
    for (int32_t t : tokens) words_.push_back(static_cast<uint32_t>(t));
}

Status SessionMirror::send() {
    // After a failure (here, or a MoE exchange that broke the communicator) or a stop nothing more is sent.
    if (!failure_ || comm_->broken() || stopped_) return lost();
    bytes_.resize(words_.size() * sizeof(uint32_t));
    std::memcpy(bytes_.data(), words_.data(), bytes_.size());
    if (Status s = comm_->broadcast(bytes_); !s) failure_ = s;
    last_sent_.store(now_ns(), std::memory_order_relaxed);
    return lost();
}

Status SessionMirror::one(MirrorOp op, uint32_t slot, uint32_t arg) {
    if (!comm_) return Status::ok();
    std::lock_guard lock(mutex_);
    begin(op, 1);
    part(slot, arg);
    return send();
}

Status SessionMirror::reset(uint32_t slot) { return one(MirrorOp::Reset, slot, 0); }
Status SessionMirror::truncate(uint32_t slot, uint32_t n) { return one(MirrorOp::Truncate, slot, n); }
Status SessionMirror::reserve_verify(uint32_t slot, uint32_t rows) { return one(MirrorOp::ReserveVerify, slot, rows); }
Status SessionMirror::keep_verified(uint32_t slot, uint32_t keep) { return one(MirrorOp::KeepVerified, slot, keep); }
Status SessionMirror::set_router(uint32_t slot, uint32_t kind) { return one(MirrorOp::SetRouter, slot, kind); }

Status SessionMirror::eval(uint32_t slot, std::span<const int32_t> tokens, bool verify) {
    if (!comm_) return Status::ok();
    std::lock_guard lock(mutex_);
    begin(MirrorOp::Eval, 1);
    part(slot, verify, tokens);
    return send();
}

Status SessionMirror::eval_batch(std::span<const Part> parts) {
    if (!comm_) return Status::ok();
    std::lock_guard lock(mutex_);
    begin(MirrorOp::EvalBatch, static_cast<uint32_t>(parts.size()));
    for (const Part& p : parts) part(p.slot, p.verify, p.tokens);
    return send();
}

Status SessionMirror::idle() {
    if (!comm_) return Status::ok();
    std::lock_guard lock(mutex_);
    begin(MirrorOp::Idle, 0);
    return send();
}

Status SessionMirror::stop() {
    if (!comm_) return Status::ok();
    end_heartbeat();
    std::lock_guard lock(mutex_);
    if (stopped_) return lost();
    begin(MirrorOp::Stop, 0);
    Status s = send();
    stopped_ = true;
    return s;
}

std::chrono::milliseconds SessionMirror::heartbeat() const {
    using std::chrono::milliseconds;
    const milliseconds limit = comm_ ? comm_->wait_limit() : milliseconds(60000);
    return std::clamp(limit / 4, milliseconds(10), milliseconds(5000));
}

Status SessionMirror::lost() const {
    std::lock_guard lock(mutex_);
    if (!failure_) return failure_;
    if (comm_ && comm_->broken()) return comm_->peer_lost();
    return Status::ok();
}

Status SessionMirror::start_heartbeat(std::function<void()> on_lost) {
    if (!comm_ || heartbeat_.joinable()) return Status::ok();
    last_sent_.store(now_ns(), std::memory_order_relaxed);
    try {
        heartbeat_ = std::thread([this, on_lost = std::move(on_lost)]() mutable { beat(std::move(on_lost)); });
    } catch (const std::system_error& e) {
        return error(std::string("cannot start the heartbeat thread: ") + e.what());
    }
    return Status::ok();
}

void SessionMirror::beat(std::function<void()> on_lost) {
    const int64_t every = std::chrono::duration_cast<std::chrono::nanoseconds>(heartbeat()).count();
    for (;;) {
        {
            std::unique_lock wait(beat_mutex_);
            const int64_t due = last_sent_.load(std::memory_order_relaxed) + every;
            beat_wake_.wait_for(wait, std::chrono::nanoseconds(std::max<int64_t>(due - now_ns(), 0)), [this] { return beat_stop_; });
            if (beat_stop_) return;
        }
        Status gone;
        {
            // An operation in flight keeps the lock (its exchanges are activity enough); the beat waits for its end.
            std::lock_guard lock(mutex_);
            if (now_ns() - last_sent_.load(std::memory_order_relaxed) >= every) idle();
            gone = lost();
        }
        if (!gone) {
            if (on_lost) on_lost();
            return;
        }
    }
}

void SessionMirror::end_heartbeat() {
    if (!heartbeat_.joinable()) return;
    {
        std::lock_guard lock(beat_mutex_);
        beat_stop_ = true;
    }
    beat_wake_.notify_all();
    heartbeat_.join();
}

}  // namespace colibri
