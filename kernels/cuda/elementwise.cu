// Element-wise ops and reductions of residual blocks, gradient accumulation and clipping (CPU reference:
// kernels/elementwise_cpu.cpp). Grid-stride loops; the sum of
// squares is a block reduction in double with one atomicAdd per block.
#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/grid_stride.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

// T: the storage type (cuda_dtype.cuh).
template <class T>
__global__ void axpy_kernel(size_t n, float alpha, const T* __restrict__ x, T* __restrict__ y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = narrow<T>(widen(y[i]) + alpha * widen(x[i]));
}

__global__ void scale_kernel(size_t n, float alpha, float* __restrict__ x) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    x[i] *= alpha;
}

__global__ void __launch_bounds__(kBlock) sum_squares_kernel(size_t n, const float* __restrict__ x,
                                                             double* __restrict__ out) {
  CNN_SHARED(double, partial, [kBlock / 32]);
  double acc = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc += static_cast<double>(x[i]) * x[i];
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kBlock / 32; ++w) total += partial[w];
    atomicAdd(out, total);
  }
}

struct PadGeom {
  int n, h, w, c, stride, k, p, q;
};

// y[n,p,q,k'] = x[n, p*stride, q*stride, k'] for k' < c, else 0.
template <class T>
__global__ void shortcut_pad_forward_kernel(PadGeom g, const T* __restrict__ x, T* __restrict__ y) {
  for_each_nhwc(g.n, g.p, g.q, g.k, [&](size_t o, Nhwc at) {
    y[o] = at.c < g.c ? x[((static_cast<size_t>(at.n) * g.h + at.h * g.stride) * g.w + at.w * g.stride) * g.c + at.c]
                      : narrow<T>(0.f);
  });
}

// dx[n, p*stride, q*stride, c'] += dy[n,p,q,c'] for c' < c (one thread per element of dy that has a place in dx).
template <class T>
__global__ void shortcut_pad_backward_add_kernel(PadGeom g, const T* __restrict__ dy, T* __restrict__ dx) {
  for_each_nhwc(g.n, g.p, g.q, g.c, [&](size_t, Nhwc at) {
    const size_t i = ((static_cast<size_t>(at.n) * g.h + at.h * g.stride) * g.w + at.w * g.stride) * g.c + at.c;
    dx[i] = narrow<T>(widen(dx[i]) + widen(dy[((static_cast<size_t>(at.n) * g.p + at.h) * g.q + at.w) * g.k + at.c]));
  });
}

PadGeom pad_geom(int n, int h, int w, int c, int stride, int k) {
  return {n, h, w, c, stride, k, (h + stride - 1) / stride, (w + stride - 1) / stride};
}

template <class T>
cudaError_t axpy_t(size_t n, float alpha, const T* d_x, T* d_y, cudaStream_t stream) {
  auto* kernel = &axpy_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, alpha, d_x, d_y);
}

template <class T>
cudaError_t shortcut_pad_forward_t(int n, int h, int w, int c, int stride, int k, const T* d_x, T* d_y,
                                   cudaStream_t stream) {
  const PadGeom g = pad_geom(n, h, w, c, stride, k);
  const size_t total = static_cast<size_t>(n) * g.p * g.q * k;
  auto* kernel = &shortcut_pad_forward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(total, kBlock), kBlock, 0, stream, g, d_x, d_y);
}

template <class T>
cudaError_t shortcut_pad_backward_add_t(int n, int h, int w, int c, int stride, int k, const T* d_dy, T* d_dx,
                                        cudaStream_t stream) {
  const PadGeom g = pad_geom(n, h, w, c, stride, k);
  const size_t total = static_cast<size_t>(n) * g.p * g.q * c;
  auto* kernel = &shortcut_pad_backward_add_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(total, kBlock), kBlock, 0, stream, g, d_dy, d_dx);
}

}  // namespace

cudaError_t scale_cuda(size_t n, float alpha, float* d_x, cudaStream_t stream) {
  return CNN_LAUNCH(scale_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, alpha, d_x);
}

cudaError_t sum_squares_cuda(size_t n, const float* d_x, double* d_sum, cudaStream_t stream) {
  return CNN_LAUNCH(sum_squares_kernel, reduction_blocks(grid_stride_blocks(n, kBlock), stream), kBlock, 0, stream, n,
                    d_x, d_sum);
}

cudaError_t axpy_cuda(DType t, size_t n, float alpha, const void* d_x, void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return axpy_t(n, alpha, static_cast<const T*>(d_x), static_cast<T*>(d_y), stream);
  });
}

cudaError_t shortcut_pad_forward_cuda(DType t, int n, int h, int w, int c, int stride, int k, const void* d_x,
                                      void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return shortcut_pad_forward_t(n, h, w, c, stride, k, static_cast<const T*>(d_x), static_cast<T*>(d_y), stream);
  });
}

cudaError_t shortcut_pad_backward_add_cuda(DType t, int n, int h, int w, int c, int stride, int k, const void* d_dy,
                                           void* d_dx, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return shortcut_pad_backward_add_t(n, h, w, c, stride, k, static_cast<const T*>(d_dy), static_cast<T*>(d_dx),
                                       stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
