// Collectives over a device backend's memory through MPI on host copies (--comm.backend mpi, and the default
// when ranks share GPUs, which NCCL refuses): each sum downloads, allreduces on the host and uploads. The
// gradient buckets still start during backward, but every bucket's download waits for the device, so this
// synchronises the host once per bucket: slower than NCCL, for debugging and GPU sharing.
#pragma once
#include <memory>

#include "kernels/backend.h"
#include "src/comm/collectives.h"

namespace cnn {

// `be` must outlive the result.
std::unique_ptr<Collectives> make_host_staged_collectives(Backend& be);

}  // namespace cnn
