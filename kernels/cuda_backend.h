// Factories of the CUDA backend (kernels/cuda_backend.cu), the same source built twice:
//   --device emu   the custom kernels run by the SIMT emulator on the CPU (always built; needs only g++)
//   --device cuda  the nvcc build on a real GPU (only when built with USE_CUDA, which defines CNN_WITH_CUDA)
// Both use only the custom kernels of kernels/*_cuda.cu; device memory comes from a DeviceArena and batch
// uploads go through pinned staging buffers on a separate copy stream.
#pragma once
#include <memory>

#include "kernels/backend.h"

namespace cnn {

std::unique_ptr<Backend> make_emu_backend();

#ifdef CNN_WITH_CUDA
// Binds GPU local_rank % device count. Throws cnn::Error(kExitFailure) with the CUDA runtime's reason when no
// usable GPU or driver is present (cudaGetDeviceCount fails or finds none).
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
#endif

}  // namespace cnn
