// Fused SGD: one read of w, g, v and one write of w, v per element (the unfused form makes four passes).
// Same expression order as sgd_update_cpu, so results differ from it only by FMA contraction.
#include "kernels/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void sgd_update_kernel(size_t n, float* __restrict__ w, const float* __restrict__ g,
                                  float* __restrict__ v, float lr, float momentum, float wd, bool nesterov) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i] + wd * w[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  }
}

}  // namespace

cudaError_t sgd_update_cuda(size_t n, float* d_w, const float* d_g, float* d_v, float lr, float momentum, float wd,
                            bool nesterov, cudaStream_t stream) {
  return CNN_LAUNCH(sgd_update_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_w, d_g, d_v, lr,
                    momentum, wd, nesterov);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
