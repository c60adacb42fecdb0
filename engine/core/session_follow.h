// The other side of SessionMirror (engine/core/session_mirror.h): every rank but 0 applies rank 0's operations to
// its own sessions, so that the MoE exchanges inside happen on every rank in the same order.
#pragma once
#include <span>

#include "engine/base/status.h"
#include "engine/core/session.h"
#include "engine/distributed/communicator.h"

namespace colibri {

// Applies rank 0's operations to `sessions` (slot i is sessions[i]; made alike on every rank, without a mirror) until
// it says stop (ok) or stops answering within the communicator's wait limit (the error).
Status follow_slots(Communicator& comm, std::span<Session* const> sessions);

}  // namespace colibri
