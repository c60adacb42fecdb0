#include "engine/distributed/launch.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "engine/distributed/mpi_communicator.h"

namespace colibri {

namespace {

// The first of the launcher's variables that holds a number in [low, 2^20]; `otherwise` without one.
uint32_t from_environment(std::initializer_list<const char*> names, unsigned long low, uint32_t otherwise) {
    for (const char* name : names)
        if (const char* v = std::getenv(name)) {
            char* end = nullptr;
            const unsigned long n = std::strtoul(v, &end, 10);
            if (end != v && *end == '\0' && n >= low && n <= 1u << 20) return static_cast<uint32_t>(n);
        }
    return otherwise;
}

}  // namespace

uint32_t launched_ranks() { return from_environment({"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}, 1, 1); }

uint32_t launched_rank() { return from_environment({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, 0, 0); }

Result<std::unique_ptr<Communicator>> communicator_from_environment() {
    const uint32_t ranks = launched_ranks();
    if (ranks <= 1) return std::unique_ptr<Communicator>(std::make_unique<SoloCommunicator>());
    if (!mpi_built())
        return error("launched as " + std::to_string(ranks) + " ranks, but this colibri was built without MPI (install libopenmpi-dev and rebuild)");
    return make_mpi_communicator();
}

}  // namespace colibri
