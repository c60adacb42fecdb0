#include "engine/distributed/communicator.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <numeric>
#include <vector>

namespace colibri {

Status SoloCommunicator::allgatherv(std::span<const uint8_t> send, std::span<uint8_t> recv, std::span<const size_t> counts) {
    if (counts.size() != 1 || counts[0] != send.size() || recv.size() != send.size())
        return error("exchange: byte counts do not match the ranks");
    std::copy(send.begin(), send.end(), recv.begin());
    return Status::ok();
}

Status Communicator::peer_lost(std::span<const uint32_t> lost) const {
    const long long ms = wait_limit_.count();
    char limit[32];
    if (ms % 1000 == 0) std::snprintf(limit, sizeof limit, "%lld s", ms / 1000);
    else std::snprintf(limit, sizeof limit, "%.3g s", double(ms) / 1000.0);
    std::string who = lost.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < lost.size(); ++i) who += (i == 0 ? "" : i + 1 == lost.size() ? " and " : ", ") + std::to_string(lost[i]);
    if (lost.empty()) who = "another rank";
    return error("rank " + std::to_string(rank()) + ": " + who + " did not answer within " + limit + " (it stopped or died)");
}

Status allgather(Communicator& comm, std::span<const uint8_t> mine, std::span<uint8_t> all) {
    const std::vector<size_t> counts(comm.size(), mine.size());
    return comm.allgatherv(mine, all, counts);
}

}  // namespace colibri
