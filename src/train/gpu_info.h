// cnntrain --gpu-info: the GPU preflight. Prints what nvidia-smi reports of the driver, then the CUDA plugin's
// report (kernels/cuda/cuda_backend.h, load_cuda_gpu_info): CUDA runtime and driver versions with the verdict (a
// driver older than the runtime needs is named with both versions and the ways out), each GPU, and each
// vendor library's version and path or every place searched. The GPU bundle runs it first.
#pragma once
#include <cstdio>

namespace cnn {

// Writes the report to `out`; returns the exit code: 0 when the GPUs are usable, 1 otherwise.
int print_gpu_info(std::FILE* out);

}  // namespace cnn
