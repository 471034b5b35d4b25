// Element-wise kernels: fill and ReLU. Grid-stride loops over a grid sized to the device, so one launch
// shape serves every tensor size.
#include "kernels/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void fill_kernel(size_t n, float value, float* __restrict__ x) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

// x and y may alias (in-place ReLU), hence no __restrict__.
__global__ void relu_forward_kernel(size_t n, const float* x, float* y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void relu_backward_kernel(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

}  // namespace

cudaError_t fill_cuda(size_t n, float value, float* d_x, cudaStream_t stream) {
  return CNN_LAUNCH(fill_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, value, d_x);
}

cudaError_t relu_forward_cuda(size_t n, const float* d_x, float* d_y, cudaStream_t stream) {
  return CNN_LAUNCH(relu_forward_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_x, d_y);
}

cudaError_t relu_backward_cuda(size_t n, const float* d_y, const float* d_dy, float* d_dx, cudaStream_t stream) {
  return CNN_LAUNCH(relu_backward_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_y, d_dy, d_dx);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
