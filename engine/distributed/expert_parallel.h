// An expert-parallel run as the session sees it: the ranks, this rank's experts, and what its exchanges cost.
// Every rank holds the same model and placement (checked once by agree_before_start), so each derives every other
// rank's share of a chosen expert from the routing alone and only the outputs travel.
#pragma once
#include <cstdint>

#include "engine/distributed/communicator.h"
#include "engine/distributed/expert_placement.h"

namespace colibri {

struct ExpertParallel {
    Communicator* comm = nullptr;
    ExpertPlacement placement;
};

// What one session's MoE exchanges cost so far (bytes this rank sent, what it received, the time in exchanges).
struct ExchangeStats {
    uint64_t exchanges = 0, bytes_sent = 0, bytes_received = 0, wait_ns = 0;
};

// Before any token: every rank's model fingerprint and placement must be rank 0's. The error names the first rank
// that differs and what. A rank that could not open its model or placement takes part with `placement` null (and
// fails with its own error), so that the others stop at once instead of waiting for it.
Status agree_before_start(Communicator& comm, uint64_t model_fingerprint, const ExpertPlacement* placement);

}  // namespace colibri
