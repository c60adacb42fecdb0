#include "server/session_mirror.h"

#include <algorithm>
#include <cstring>

namespace colibri::server {

namespace {

// An operation travels as 32-bit words: the op, its parts, then per part the slot, one argument (a count, or
// whether it is a check) and the tokens with their count.
enum Op : uint32_t { kIdle, kStop, kReset, kTruncate, kReserveVerify, kKeepVerified, kEval, kEvalBatch };

}  // namespace

SessionMirror::SessionMirror(Communicator* comm) : comm_(comm && comm->size() > 1 ? comm : nullptr) {}

void SessionMirror::begin(uint32_t op, uint32_t parts) {
    words_.clear();
    words_.push_back(op);
    words_.push_back(parts);
}

void SessionMirror::part(uint32_t slot, uint32_t arg, std::span<const int32_t> tokens) {
    words_.push_back(slot);
    words_.push_back(arg);
    words_.push_back(static_cast<uint32_t>(tokens.size()));
    for (int32_t t : tokens) words_.push_back(static_cast<uint32_t>(t));
}

void SessionMirror::send() {
    // After a failure (here, or a MoE exchange that broke the communicator) nothing more is sent.
    if (!comm_ || !failure_ || comm_->broken()) return;
    bytes_.resize(words_.size() * sizeof(uint32_t));
    std::memcpy(bytes_.data(), words_.data(), bytes_.size());
    if (Status s = comm_->broadcast(bytes_); !s) failure_ = s;
}

void SessionMirror::reset(uint32_t slot) {
    if (!comm_) return;
    begin(kReset, 1);
    part(slot, 0);
    send();
}

void SessionMirror::truncate(uint32_t slot, uint32_t n) {
    if (!comm_) return;
    begin(kTruncate, 1);
    part(slot, n);
    send();
}

void SessionMirror::reserve_verify(uint32_t slot, uint32_t rows) {
    if (!comm_) return;
    begin(kReserveVerify, 1);
    part(slot, rows);
    send();
}

void SessionMirror::keep_verified(uint32_t slot, uint32_t keep) {
    if (!comm_) return;
    begin(kKeepVerified, 1);
    part(slot, keep);
    send();
}

void SessionMirror::eval(uint32_t slot, std::span<const int32_t> tokens, bool verify) {
    if (!comm_) return;
    begin(kEval, 1);
    part(slot, verify, tokens);
    send();
}

void SessionMirror::eval_batch(std::span<const Part> parts) {
    if (!comm_) return;
    begin(kEvalBatch, static_cast<uint32_t>(parts.size()));
    for (const Part& p : parts) part(p.slot, p.verify, p.tokens);
    send();
}

void SessionMirror::idle() {
    if (!comm_) return;
    begin(kIdle, 0);
    send();
}

void SessionMirror::stop() {
    if (!comm_) return;
    begin(kStop, 0);
    send();
}

std::chrono::milliseconds SessionMirror::heartbeat() const {
    using std::chrono::milliseconds;
    const milliseconds limit = comm_ ? comm_->wait_limit() : milliseconds(60000);
    return std::clamp(limit / 4, milliseconds(10), milliseconds(5000));
}

Status SessionMirror::lost() const {
    if (!failure_) return failure_;
    if (comm_ && comm_->broken()) return comm_->peer_lost();
    return Status::ok();
}

namespace {

struct FollowedPart {
    Session* session;
    uint32_t arg;
    std::span<const int32_t> tokens;
};

// The words of one operation into its parts; false when they do not fit what rank 0 writes.
bool decode(std::span<const uint32_t> words, std::span<Session* const> sessions, std::vector<FollowedPart>& parts) {
    parts.clear();
    if (words.size() < 2) return false;
    size_t at = 2;
    for (uint32_t i = 0; i < words[1]; ++i) {
        if (words.size() - at < 3 || words[at] >= sessions.size() || words.size() - at - 3 < words[at + 2]) return false;
        // int32_t may alias uint32_t: the tokens are read in place.
        parts.push_back({sessions[words[at]], words[at + 1], {reinterpret_cast<const int32_t*>(words.data() + at + 3), words[at + 2]}});
        at += 3 + size_t(words[at + 2]);
    }
    return at == words.size();
}

}  // namespace

Status follow_slots(Communicator& comm, std::span<Session* const> sessions) {
    std::vector<uint8_t> bytes;
    std::vector<uint32_t> words;
    std::vector<FollowedPart> parts;
    std::vector<Session::BatchPart> batch;
    for (;;) {
        COLIBRI_TRY(comm.broadcast(bytes));
        words.resize(bytes.size() / sizeof(uint32_t));
        std::memcpy(words.data(), bytes.data(), words.size() * sizeof(uint32_t));
        const auto unreadable = [&] { return error("rank " + std::to_string(comm.rank()) + ": rank 0 sent an operation this rank cannot read"); };
        if (bytes.size() % sizeof(uint32_t) != 0 || !decode(words, sessions, parts)) return unreadable();
        const uint32_t op = words[0];
        const bool fits = op <= kStop ? parts.empty() : op <= kEval ? parts.size() == 1 : op == kEvalBatch && !parts.empty();
        if (!fits) return unreadable();
        // The results are rank 0's to use: a follower only keeps its sessions where rank 0's are.
        Status done;
        switch (op) {
        case kIdle: break;
        case kStop: return Status::ok();
        case kReset: parts[0].session->reset(); break;
        case kTruncate: done = parts[0].session->truncate(parts[0].arg); break;
        case kReserveVerify: parts[0].session->reserve_verify(parts[0].arg); break;
        case kKeepVerified: parts[0].session->keep_verified(parts[0].arg); break;
        case kEval:
            done = parts[0].arg ? parts[0].session->verify(parts[0].tokens).status() : parts[0].session->eval(parts[0].tokens).status();
            break;
        case kEvalBatch:
            batch.clear();
            for (const FollowedPart& p : parts) batch.push_back({p.session, p.tokens, p.arg != 0});
            done = Session::eval_batch(batch);
            break;
        }
        if (comm.broken()) return done ? comm.peer_lost() : done;
    }
}

}  // namespace colibri::server
