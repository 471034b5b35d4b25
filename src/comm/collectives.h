// The implementations of Collectives (kernels/collectives.h), one per kind of memory and transport. Only the
// code that chooses them includes this (src/train/setup.cpp, tests); everything else is handed a Collectives*.
#pragma once
#include <memory>

#include "kernels/backend.h"
#include "kernels/collectives.h"

namespace cnn {

// Host memory through MPI (src/comm/mpi_collectives.cpp): blocking sums; non-blocking bucket allreduces
// progressed while backward runs. Works on one rank too (every sum is then the identity).
std::unique_ptr<Collectives> make_mpi_collectives();

// A device backend's memory through MPI on host copies (src/comm/host_staged_collectives.cpp; --comm.backend
// mpi, and the default when ranks share GPUs, which NCCL refuses): each sum downloads, allreduces on the host
// and uploads. The gradient buckets still start during backward, but every bucket's download waits for the
// device, so this synchronises the host once per bucket: slower than NCCL, for debugging and GPU sharing.
// `be` must outlive the result.
std::unique_ptr<Collectives> make_host_staged_collectives(Backend& be);

// NCCL (src/comm/nccl_collectives.cu) over the memory of `be`, which must come from make_emu_backend
// (emulated NCCL) or the CUDA backend (libnccl). Collective: every rank calls it, rank 0's ncclUniqueId
// reaches the others through MPI. Must not outlive `be`.
std::unique_ptr<Collectives> make_emu_collectives(Backend& be);
#ifdef CNN_WITH_CUDA
// The nvcc build's, linked directly by the GPU tests; cnntrain reaches it through the plugin
// (load_cuda_collectives, kernels/cuda/cuda_backend.h).
std::unique_ptr<Collectives> make_cuda_collectives(Backend& be);
#endif

}  // namespace cnn
