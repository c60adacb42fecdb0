#include "engine/core/session_follow.h"

#include <cstring>
#include <string>
#include <vector>

#include "engine/core/session_mirror.h"

namespace colibri {

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

// Whether an operation has the parts it needs.
bool fits(MirrorOp op, size_t parts) {
    switch (op) {
        case MirrorOp::Idle:
        case MirrorOp::Stop: return parts == 0;
        case MirrorOp::EvalBatch: return parts > 0;
        default: return parts == 1;
    }
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
        if (words[0] > static_cast<uint32_t>(MirrorOp::EvalBatch)) return unreadable();
        const auto op = static_cast<MirrorOp>(words[0]);
        if (!fits(op, parts.size())) return unreadable();
        // The results are rank 0's to use: a follower only keeps its sessions where rank 0's are.
        Status done;
        switch (op) {
            case MirrorOp::Idle: break;
            case MirrorOp::Stop: return Status::ok();
            case MirrorOp::Reset: parts[0].session->reset(); break;
            case MirrorOp::Truncate: done = parts[0].session->truncate(parts[0].arg); break;
            case MirrorOp::ReserveVerify: parts[0].session->reserve_verify(parts[0].arg); break;
            case MirrorOp::KeepVerified: parts[0].session->keep_verified(parts[0].arg); break;
            case MirrorOp::SetRouter:
                if (parts[0].arg > static_cast<uint32_t>(RouterKind::Lut)) return unreadable();
                parts[0].session->set_router(static_cast<RouterKind>(parts[0].arg));
                break;
            case MirrorOp::Eval:
                done = parts[0].arg ? parts[0].session->verify(parts[0].tokens).status() : parts[0].session->eval(parts[0].tokens).status();
                break;
            case MirrorOp::EvalBatch:
                batch.clear();
                for (const FollowedPart& p : parts) batch.push_back({p.session, p.tokens, p.arg != 0});
                done = Session::eval_batch(batch);
                break;
        }
        if (comm.broken()) return done ? comm.peer_lost() : done;
    }
}

}  // namespace colibri
