// Which communicator this process runs with: started by mpirun (Open MPI's or a PMI launcher's environment names
// more than one rank), MPI; otherwise one process alone. The MPI communicator exists only in builds that found MPI.
#pragma once
#include <memory>

#include "engine/base/status.h"
#include "engine/distributed/communicator.h"

namespace colibri {

// The ranks a launcher announced in the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE); 1 without a launcher.
uint32_t launched_ranks();
// This process's rank as the launcher announced it (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK); 0 without one.
uint32_t launched_rank();
// MPI when launched with several ranks (an error in a build without MPI), else a SoloCommunicator. MPI's error
// handler returns errors instead of aborting; every exchange is bounded by the communicator's wait limit.
Result<std::unique_ptr<Communicator>> communicator_from_environment();

}  // namespace colibri
