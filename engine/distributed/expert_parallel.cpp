#include "engine/distributed/expert_parallel.h"

#include <cstring>
#include <string>
#include <vector>
#include <xxhash.h>

namespace colibri {

Status agree_before_start(Communicator& comm, uint64_t model_fingerprint, const ExpertPlacement* placement) {
    const std::string text = placement ? placement->to_json() : std::string();
    const uint64_t mine[3] = {placement != nullptr, model_fingerprint, XXH64(text.data(), text.size(), 0)};
    std::vector<uint64_t> all(3 * size_t(comm.size()));
    if (Status s = allgather(comm, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(mine), sizeof mine),
                             std::span<uint8_t>(reinterpret_cast<uint8_t*>(all.data()), all.size() * sizeof(uint64_t)));
        !s)
        return error("ranks could not agree before the first token: " + s.message());
    for (uint32_t r = 0; r < comm.size(); ++r)
        if (all[3 * r] == 0 && r != comm.rank()) return error("rank " + std::to_string(r) + " could not open the model or its placement (its own error says why)");
    if (placement == nullptr) return error("this rank could not open the model or its placement");
    for (uint32_t r = 1; r < comm.size(); ++r) {
        if (all[3 * r + 1] != all[1]) return error("rank " + std::to_string(r) + " opened another model file than rank 0 (the files' metadata checksums differ)");
        if (all[3 * r + 2] != all[2]) return error("rank " + std::to_string(r) + " read another expert placement than rank 0");
    }
    return Status::ok();
}

}  // namespace colibri
