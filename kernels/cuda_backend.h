// Factories of the CUDA backend (kernels/cuda_backend.cu), the same source built twice:
//   --device emu   the custom kernels run by the SIMT emulator on the CPU (always built; needs only g++)
//   --device cuda  the nvcc build on a real GPU (only when built with USE_CUDA, which defines CNN_WITH_CUDA):
//                  cuDNN convolutions and batch norm and cuBLASLt linear layers where they serve the problem
//                  (--conv.impl), the custom kernels otherwise.
// Device memory comes from a DeviceArena; batch uploads go through pinned staging buffers on a copy stream.
// The nvcc build and the libraries it needs live in a plugin, build/libcnntrain-cuda.so, that cnntrain loads
// on --device cuda only, so the trainer starts and runs --device cpu on a machine without CUDA libraries.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kernels/algo_select.h"
#include "kernels/backend.h"

namespace cnn {

// How the CUDA backend computes (the --conv.*, --cudnn.*, --gpu.* and --deterministic options).
struct GpuOptions {
  ConvImpl conv_impl = ConvImpl::kAuto;  // vendor libraries on a GPU under auto; never under the emulator
  size_t workspace_bytes = size_t{512} << 20;  // cap of one cuDNN/cuBLASLt workspace
  bool algo_search = false;    // cuDNN: timed search per shape instead of heuristics
  bool deterministic = false;  // reproducible algorithms only; custom reductions without cross-block atomics
  bool tf32 = true;            // TF32 tensor cores for fp32 convolutions and matmuls (Ampere and newer)
  // One-line notes (a layer falling back to the custom kernel). Null: stderr, on the logging rank only.
  std::function<void(const std::string&)> log;
};

std::unique_ptr<Backend> make_emu_backend(const GpuOptions& opts = {});

#ifdef CNN_WITH_CUDA
// Binds GPU local_rank % device count. Throws cnn::Error(kExitFailure) with the CUDA runtime's reason when no
// usable GPU or driver is present (cudaGetDeviceCount fails or finds none). Linked directly by the GPU tests;
// cnntrain reaches it through load_cuda_backend.
std::unique_ptr<Backend> make_cuda_backend(int local_rank, const GpuOptions& opts = {});
#endif

// Loads the plugin (libcnntrain-cuda.so beside the executable, in ../lib from it, or $CNNTRAIN_CUDA_PLUGIN) and
// makes its backend. Throws cnn::Error(kExitFailure) naming the library that did not load (dlerror) and what
// to install, or the CUDA runtime's reason as make_cuda_backend does.
std::unique_ptr<Backend> load_cuda_backend(int local_rank, const GpuOptions& opts);

}  // namespace cnn

// The plugin's entry point (C linkage, looked up with dlsym). Returns null and sets *error on failure.
extern "C" cnn::Backend* cnntrain_cuda_make_backend(int local_rank, const cnn::GpuOptions* opts, std::string* error,
                                                    int* error_code);
