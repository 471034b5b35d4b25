// What other CUDA sources need of a CudaBackend (kernels/cuda/cuda_backend.cu): its compute stream, which every
// op of the backend is ordered on, and its device arena. Included by kernels/*.cu only (CUDA types).
#pragma once
#include "kernels/backend.h"
#include "kernels/cuda/cuda_arena.h"

namespace cnn {
namespace CNN_CUDA_NS {

struct DeviceContext {
  cudaStream_t compute = nullptr;
  DeviceArena* arena = nullptr;
};

// `be` must be this build's CudaBackend (make_emu_backend under the emulator, make_cuda_backend under nvcc);
// anything else ends the job.
DeviceContext device_context(Backend& be);

}  // namespace CNN_CUDA_NS
}  // namespace cnn
