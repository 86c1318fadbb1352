// src/dist/dist_internal.h: what the communicator files share (not a public header).
#pragma once

#include <memory>
#include <string>

#include "rlx/comm.h"

namespace rlx::dist::detail {

// "4096 f32, 16 KiB": a call's size as error messages print it.
std::string describe_size(int64_t count, DType dtype);
// `what`: a count that is negative, odd for packed 4-bit types, or a null buffer.
Status check_buffer(const char* what, const void* p, int64_t count, DType dtype);
// Which reductions exist: every op on floats and integers, max/min/prod on bool, sum/prod on
// c64, none on packed 4-bit types (unsupported otherwise, naming the dtype and op).
Status check_reduce(const char* what, DType dtype, ReduceOp op);

#ifdef RLX_HAVE_MPI
// MPI's world (MPI_Init_thread on first call, MPI_Finalize at exit when every communicator is
// healthy). Defined in mpi_communicator.cpp.
Expected<std::shared_ptr<Communicator>> mpi_world_communicator();
#endif

}  // namespace rlx::dist::detail
