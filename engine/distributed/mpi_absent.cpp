// A build without MPI: one process only.
#include "engine/distributed/mpi_communicator.h"

namespace colibri {

bool mpi_built() { return false; }

Result<std::unique_ptr<Communicator>> make_mpi_communicator() { return error("this colibri was built without MPI"); }

}  // namespace colibri
