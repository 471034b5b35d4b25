// What the cuDNN and cuBLASLt paths of the CUDA backend share (nvcc builds only): the compute stream, the
// algorithm policy, device memory from the backend's arena and the fallback log. Owned by the backend.
#pragma once
#include <string>

#include "kernels/cuda/vendor/algo_select.h"
#include "kernels/cuda/cuda_arena.h"
#include "kernels/dtype.h"

namespace cnn {
namespace gpu {

// The element type of a vendor-library problem's activations and filters (cnn::DType's values); part of every
// cache key.
enum class VendorType { kF32 = 0, kBF16 = 1, kF16 = 2 };
inline VendorType vendor_type(DType t) { return static_cast<VendorType>(static_cast<int>(t)); }

struct VendorContext {
  cudaStream_t stream = nullptr;
  DeviceArena* arena = nullptr;
  AlgoPolicy policy;         // workspace cap, determinism
  bool search = false;       // timed search instead of heuristics (cuDNN)
  bool tf32 = true;          // TF32 tensor cores for fp32 problems (Ampere and newer)
  FallbackLog* fallbacks = nullptr;
  const char* layer = "";    // the layer now running (Backend::set_label), for the fallback log

  // Scratch for one library call, at most policy.workspace_cap bytes (contents not kept between calls);
  // grows on demand, like the backend's own workspace. Kernels run in stream order, so one buffer serves.
  void* workspace(size_t bytes) {
    if (bytes > work_bytes_) {
      arena->release(work_, stream);
      work_ = arena->alloc(bytes, stream);
      work_bytes_ = bytes;
    }
    return work_;
  }
  void release_workspace() {
    arena->release(work_, stream);
    work_ = nullptr;
    work_bytes_ = 0;
  }

 private:
  void* work_ = nullptr;
  size_t work_bytes_ = 0;
};

}  // namespace gpu
}  // namespace cnn
