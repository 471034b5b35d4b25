// Fused optimizer updates: one read and one write of each buffer per element (unfused forms make four or
// more passes). Same expression order as the CPU references, so results differ only by FMA contraction.
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void sgd_update_kernel(size_t n, float* __restrict__ w, const float* __restrict__ g,
                                  float* __restrict__ v, float lr, float momentum, float wd, bool nesterov,
                                  const int64_t* __restrict__ gate) {
  if (gate && *gate != 0) return;  // a skipped step (non-finite gradient)
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i] + wd * w[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  }
}

// AdamW with decoupled weight decay, the same float expression as the reference (kernels/optimizer_cpu.cpp).
__global__ void adamw_update_kernel(size_t n, float* __restrict__ w, const float* __restrict__ g,
                                    float* __restrict__ m, float* __restrict__ v, float lr, float beta1, float beta2,
                                    float eps, float wd, float inv_bc1, float inv_bc2,
                                    const int64_t* __restrict__ gate) {
  if (gate && *gate != 0) return;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (wd * w[i] + (mi * inv_bc1) / (sqrtf(vi * inv_bc2) + eps));
  }
}

}  // namespace

cudaError_t sgd_update_cuda(size_t n, float* d_w, const float* d_g, float* d_v, float lr, float momentum, float wd,
                            bool nesterov, cudaStream_t stream, const int64_t* d_gate) {
  return CNN_LAUNCH(sgd_update_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_w, d_g, d_v, lr,
                    momentum, wd, nesterov, d_gate);
}

cudaError_t adamw_update_cuda(size_t n, float* d_w, const float* d_g, float* d_m, float* d_v, float lr, float beta1,
                              float beta2, float eps, float wd, float bc1, float bc2, cudaStream_t stream,
                              const int64_t* d_gate) {
  return CNN_LAUNCH(adamw_update_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_w, d_g, d_m, d_v, lr,
                    beta1, beta2, eps, wd, 1.0f / bc1, 1.0f / bc2, d_gate);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
