// The vendor-library paths of the CUDA backend in one place (nvcc builds only): cuDNN convolutions and
// batch norm, cuBLASLt linear layers, their shared context and the fallback log. The backend asks them first
// and runs its custom kernel when one returns false.
#pragma once
#include <string>

#include "kernels/cuda/vendor/cublaslt_linear.h"
#include "kernels/cuda/vendor/cudnn_batchnorm.h"
#include "kernels/cuda/vendor/cudnn_conv.h"

namespace cnn {
namespace gpu {

struct VendorLibs {
  VendorContext ctx;
  FallbackLog fallbacks;
  CudnnConv conv;
  CudnnBatchNorm bn;
  CublasLtLinear linear;

  VendorLibs(cudaStream_t stream, DeviceArena& arena, const AlgoPolicy& policy, bool search, bool tf32,
             std::function<void(const std::string&)> log)
      : ctx(make_ctx(stream, arena, policy, search, tf32)), fallbacks(std::move(log)), conv(ctx),
        bn(ctx, conv.handle()), linear(ctx) {
    ctx.fallbacks = &fallbacks;
  }
  ~VendorLibs() { ctx.release_workspace(); }

 private:
  static VendorContext make_ctx(cudaStream_t stream, DeviceArena& arena, const AlgoPolicy& policy, bool search,
                                bool tf32) {
    VendorContext c;
    c.stream = stream;
    c.arena = &arena;
    c.policy = policy;
    c.search = search;
    c.tf32 = tf32;
    return c;
  }
};

}  // namespace gpu
}  // namespace cnn
