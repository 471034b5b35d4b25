// Factories of the CUDA backend (kernels/cuda/cuda_backend.cu), the same source built twice:
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

#include "kernels/cuda/vendor/algo_select.h"
#include "kernels/backend.h"

namespace cnn {

class Collectives;

// How the CUDA backend computes (the --conv.*, --cudnn.*, --gpu.* and --deterministic options).
struct GpuOptions {
  ConvImpl conv_impl = ConvImpl::kAuto;  // vendor libraries on a GPU under auto; never under the emulator
  // Cap of one cuDNN/cuBLASLt workspace; kWorkspaceAuto: 1/16 of the GPU's memory, at least 512 MiB (on an H100,
  // fp32 without TF32 at batch 256 trained 2.8x faster with the algorithms a 512 MiB cap ruled out; docs/perf.md).
  static constexpr size_t kWorkspaceAuto = ~size_t{0};
  size_t workspace_bytes = kWorkspaceAuto;
  bool algo_search = false;    // cuDNN: timed search per shape instead of heuristics
  bool deterministic = false;  // reproducible algorithms only; custom reductions without cross-block atomics
  bool tf32 = true;            // TF32 tensor cores for fp32 convolutions and matmuls (Ampere and newer)
  // cuDNN for the batch norms it can take (no fused ReLU or residual join: ResNet projection shortcuts); off:
  // the custom kernels, which ran these shapes 10x faster on an H100 (docs/perf.md, GPU second contact).
  bool vendor_batchnorm = false;
  // 16-bit convolutions and matmuls of the custom kernels on tensor cores (wmma); false: the portable SIMT tile
  // kernel (as CNNTRAIN_CUDA_GEMM=simt makes it for every backend). Both are per backend, not per process.
  bool tensor_core_gemm = true;
  // One-line notes (a layer falling back to the custom kernel). Null: stderr, on the logging rank only.
  std::function<void(const std::string&)> log;
};

// What the binding table shows of a device.
struct DeviceInfo {
  std::string name, pci_bus_id;
  double memory_gib = 0;
};

std::unique_ptr<Backend> make_emu_backend(const GpuOptions& opts = {});
DeviceInfo emu_device_info();

#ifdef CNN_WITH_CUDA
// The GPU build's functions, linked directly by the GPU tests; cnntrain reaches them through the plugin
// (load_cuda_* below). cuda_device_count: GPUs this process can see (CUDA_VISIBLE_DEVICES applied); throws
// cnn::Error(kExitFailure) with the CUDA runtime's reason when no usable driver is present.
int cuda_device_count();
DeviceInfo cuda_device_info(int device);
// Binds GPU device % device count (the device chosen by choose_device of src/comm/device_binding.h). Throws
// cnn::Error(kExitFailure) with the CUDA runtime's reason when no usable GPU or driver is present.
std::unique_ptr<Backend> make_cuda_backend(int device, const GpuOptions& opts = {});
#endif

// Loads the plugin (libcnntrain-cuda.so beside the executable, in ../lib from it, or $CNNTRAIN_CUDA_PLUGIN) and
// makes its backend. Throws cnn::Error(kExitFailure) naming the library that did not load (dlerror) and what
// to install, or the CUDA runtime's reason as make_cuda_backend does.
std::unique_ptr<Backend> load_cuda_backend(int device, const GpuOptions& opts);
// The plugin's cuda_device_count, cuda_device_info and make_cuda_collectives (src/comm/collectives.h), loading
// it if needed.
int load_cuda_device_count();
// cnntrain --gpu-info: the plugin's report (its path, CUDA runtime and driver versions with the verdict, each
// GPU, each vendor library's version and path or why it is missing) appended to *report; `nvidia_smi_release`
// (the driver version nvidia-smi printed, or empty) names the driver where /proc does not. Returns 0 when the
// GPUs are usable with the default --conv.impl auto, 1 otherwise. A plugin that does not load throws
// cnn::Error(kExitFailure) with the reason.
int load_cuda_gpu_info(const std::string& nvidia_smi_release, std::string* report);
DeviceInfo load_cuda_device_info(int device);
std::unique_ptr<Collectives> load_cuda_collectives(Backend& be);

}  // namespace cnn

// The plugin's entry points (C linkage, looked up with dlsym). They return null (or -1) and set *error and
// *error_code on failure.
extern "C" cnn::Backend* cnntrain_cuda_make_backend(int device, const cnn::GpuOptions* opts, std::string* error,
                                                    int* error_code);
extern "C" int cnntrain_cuda_device_count(std::string* error, int* error_code);
extern "C" void cnntrain_cuda_device_info(int device, cnn::DeviceInfo* info);
extern "C" cnn::Collectives* cnntrain_cuda_make_collectives(cnn::Backend* be, std::string* error, int* error_code);
extern "C" int cnntrain_cuda_gpu_info(const std::string* nvidia_smi_release, std::string* report);
