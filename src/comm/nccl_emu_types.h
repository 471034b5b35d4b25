// The emulated NCCL's data types over MPI (src/comm/nccl_emu.cpp): element sizes, the MPI datatype and
// reduction each NCCL type and operation travels as, and ncclAvg's division after the sum.
#pragma once
#include <mpi.h>

#include <cstddef>

#include "src/comm/nccl_emu.h"

namespace simt {
namespace nccl {
namespace types {

// Bytes per element; 0 for a type the emulation does not know.
size_t type_size(ncclDataType_t t);
MPI_Datatype mpi_type(ncclDataType_t t);
// ncclAvg travels as a sum (see average).
MPI_Op mpi_op(ncclDataType_t t, ncclRedOp_t op);
// ncclAvg: NCCL sums and divides by the rank count (integers: truncating division).
void average(void* p, size_t n, ncclDataType_t t, int ranks);

}  // namespace types
}  // namespace nccl
}  // namespace simt
