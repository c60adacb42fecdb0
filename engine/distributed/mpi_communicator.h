// MPI_COMM_WORLD behind the Communicator interface (built only where CMake found MPI; elsewhere
// make_mpi_communicator returns an error and mpi_built() is false).
#pragma once
#include <memory>

#include "engine/base/status.h"
#include "engine/distributed/communicator.h"

namespace colibri {

// Whether this build can run ranks over MPI (CMake found it and COLIBRI_WITH_MPI is on).
bool mpi_built();
// MPI_Init_thread (MPI_THREAD_SERIALIZED: one thread at a time calls MPI) unless the program started MPI itself, a
// duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN. Finalizes MPI when destroyed if it started it, unless an exchange
// failed (a dead peer would hold MPI_Finalize forever). MPI cannot start again after that: then an error.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();

}  // namespace colibri
