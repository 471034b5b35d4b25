// The NCCL API for the source that calls it (src/comm/nccl_collectives.cu), chosen like the CUDA runtime
// of kernels/simt/cuda_compat.h: nvcc gets the real <nccl.h>, its functions resolved from libnccl when first
// called (src/comm/nccl_lazy.h), g++ the emulated NCCL of src/comm/nccl_emu.h (over MPI, ordered by the SIMT
// emulator's streams).
#pragma once
#include "kernels/simt/cuda_compat.h"

#if CNN_SIMT_EMULATED
#include "src/comm/nccl_emu.h"
#else
#include "src/comm/nccl_lazy.h"
#endif
