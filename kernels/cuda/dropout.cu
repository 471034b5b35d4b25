// Inverted dropout (CPU reference: kernels/dropout_cpu.cpp).
// The keep bit of element j of a sample is the counter-based hash of (key, global sample id, j) from
// kernels/rng.h, so the GPU draws exactly the CPU's masks, independent of the launch shape.
#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/rng.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

// T: the storage type of x, y, dy and dx (cuda_dtype.cuh).
template <class T>
__global__ void dropout_forward_kernel(int n, size_t per_sample, const T* __restrict__ x, float p, uint64_t key,
                                       const int64_t* __restrict__ ids, T* __restrict__ y,
                                       uint8_t* __restrict__ mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  const size_t total = static_cast<size_t>(n) * per_sample;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t s = i / per_sample, j = i % per_sample;
    const uint64_t sample_key = hash_key(key, static_cast<uint64_t>(ids[s]));
    const uint8_t keep = uniform01(mix64(sample_key ^ mix64(j))) >= p;
    mask[i] = keep;
    y[i] = narrow<T>(keep ? widen(x[i]) * keep_scale : 0.f);
  }
}

template <class T>
__global__ void dropout_backward_kernel(size_t count, float p, const T* __restrict__ dy,
                                        const uint8_t* __restrict__ mask, T* __restrict__ dx) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dx[i] = narrow<T>(mask[i] ? widen(dy[i]) * keep_scale : 0.f);
}

template <class T>
cudaError_t dropout_forward_t(int n, size_t per_sample, const T* d_x, float p, uint64_t key, const int64_t* d_ids,
                              T* d_y, uint8_t* d_mask, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * per_sample;
  auto* kernel = &dropout_forward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(total, kBlock), kBlock, 0, stream, n, per_sample, d_x, p, key, d_ids,
                    d_y, d_mask);
}

template <class T>
cudaError_t dropout_backward_t(size_t count, float p, const T* d_dy, const uint8_t* d_mask, T* d_dx,
                               cudaStream_t stream) {
  auto* kernel = &dropout_backward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(count, kBlock), kBlock, 0, stream, count, p, d_dy, d_mask, d_dx);
}

}  // namespace

cudaError_t dropout_forward_cuda(DType t, int n, size_t per_sample, const void* d_x, float p, uint64_t key,
                                 const int64_t* d_ids, void* d_y, uint8_t* d_mask, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return dropout_forward_t(n, per_sample, static_cast<const T*>(d_x), p, key, d_ids, static_cast<T*>(d_y), d_mask,
                             stream);
  });
}

cudaError_t dropout_backward_cuda(DType t, size_t count, float p, const void* d_dy, const uint8_t* d_mask, void* d_dx,
                                  cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return dropout_backward_t(count, p, static_cast<const T*>(d_dy), d_mask, static_cast<T*>(d_dx), stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
