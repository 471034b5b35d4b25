// The ops where a graph network's branches meet (CPU reference: kernels/join_cpu.cpp): add, the
// squeeze-excitation / same-shape mul and its backward, and the slices of a channel concatenation.
// Grid-stride loops over elements; the mul's channel sums run one thread per (sample, channel), neighbouring
// threads on neighbouring channels (coalesced), each adding its hw products in increasing order.
#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

// y may alias a or b. T: the storage type (cuda_dtype.cuh).
template <class T>
__global__ void add_forward_kernel(size_t n, const T* a, const T* b, T* y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = narrow<T>(widen(a[i]) + widen(b[i]));
}

// out (+)= in * s[i / (hw*c), i % c] over the n*hw*c elements of in: the forward (in = x, out = y, which may
// alias x) and the backward's dx (in = dy).
template <class T>
__global__ void mul_scale_kernel(int n, int hw, int c, bool accumulate, const T* in, const T* __restrict__ s,
                                 T* out) {
  const size_t total = static_cast<size_t>(n) * hw * c, per_sample = static_cast<size_t>(hw) * c;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = widen(in[i]) * widen(s[i / per_sample * c + i % c]);
    out[i] = narrow<T>(accumulate ? widen(out[i]) + v : v);
  }
}

// ds[i, k] (+)= sum over j of dy[i, j, k] * x[i, j, k].
template <class T>
__global__ void mul_channel_sums_kernel(int n, int hw, int c, bool accumulate, const T* __restrict__ x,
                                        const T* __restrict__ dy, T* __restrict__ ds) {
  const size_t outputs = static_cast<size_t>(n) * c;
  for (size_t o = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; o < outputs;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t base = o / c * hw * c + o % c;
    float sum = 0.f;
    for (int j = 0; j < hw; ++j) {
      const size_t i = base + static_cast<size_t>(j) * c;
      sum += widen(dy[i]) * widen(x[i]);
    }
    ds[o] = narrow<T>(accumulate ? widen(ds[o]) + sum : sum);
  }
}

// y[r, offset + j] = x[r, j] for j < width (y's rows `stride` wide).
template <class T>
__global__ void concat_copy_in_kernel(int rows, int width, int stride, int offset, const T* __restrict__ x,
                                      T* __restrict__ y) {
  const size_t total = static_cast<size_t>(rows) * width;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i / width * stride + offset + i % width] = x[i];
}

// dx[r, j] (+)= dy[r, offset + j].
template <class T>
__global__ void concat_copy_out_kernel(int rows, int width, int stride, int offset, bool accumulate,
                                       const T* __restrict__ dy, T* __restrict__ dx) {
  const size_t total = static_cast<size_t>(rows) * width;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const T g = dy[i / width * stride + offset + i % width];
    dx[i] = accumulate ? narrow<T>(widen(dx[i]) + widen(g)) : g;
  }
}

}  // namespace

cudaError_t add_forward_cuda(DType t, size_t n, const void* d_a, const void* d_b, void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &add_forward_kernel<T>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, static_cast<const T*>(d_a),
                      static_cast<const T*>(d_b), static_cast<T*>(d_y));
  });
}

cudaError_t mul_forward_cuda(DType t, int n, int hw, int c, const void* d_x, const void* d_s, void* d_y,
                             cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &mul_scale_kernel<T>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(static_cast<size_t>(n) * hw * c, kBlock), kBlock, 0, stream, n, hw,
                      c, false, static_cast<const T*>(d_x), static_cast<const T*>(d_s), static_cast<T*>(d_y));
  });
}

cudaError_t mul_backward_cuda(DType t, int n, int hw, int c, const void* d_x, const void* d_s, const void* d_dy,
                              void* d_dx, void* d_ds, bool accumulate, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    if (d_dx) {
      auto* kernel = &mul_scale_kernel<T>;
      const cudaError_t err =
          CNN_LAUNCH(kernel, grid_stride_blocks(static_cast<size_t>(n) * hw * c, kBlock), kBlock, 0, stream, n, hw, c,
                     accumulate, static_cast<const T*>(d_dy), static_cast<const T*>(d_s), static_cast<T*>(d_dx));
      if (err != cudaSuccess) return err;
    }
    if (!d_ds) return cudaSuccess;
    auto* kernel = &mul_channel_sums_kernel<T>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(static_cast<size_t>(n) * c, kBlock), kBlock, 0, stream, n, hw, c,
                      accumulate, static_cast<const T*>(d_x), static_cast<const T*>(d_dy), static_cast<T*>(d_ds));
  });
}

cudaError_t concat_copy_in_cuda(DType t, int rows, int width, int stride, int offset, const void* d_x, void* d_y,
                                cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &concat_copy_in_kernel<T>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(static_cast<size_t>(rows) * width, kBlock), kBlock, 0, stream, rows,
                      width, stride, offset, static_cast<const T*>(d_x), static_cast<T*>(d_y));
  });
}

cudaError_t concat_copy_out_cuda(DType t, int rows, int width, int stride, int offset, const void* d_dy, void* d_dx,
                                 bool accumulate, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &concat_copy_out_kernel<T>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(static_cast<size_t>(rows) * width, kBlock), kBlock, 0, stream, rows,
                      width, stride, offset, accumulate, static_cast<const T*>(d_dy), static_cast<T*>(d_dx));
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
