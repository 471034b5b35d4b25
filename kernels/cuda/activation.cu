// Element-wise kernels: fill, ReLU, the parameterised activations (kernels/activation.h) and dtype conversion.
// Grid-stride loops over a grid sized to the device, so one launch shape serves every tensor size.
#include "kernels/activation.h"
#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void fill_kernel(size_t n, float value, float* __restrict__ x) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    x[i] = value;
}

// x and y may alias (in-place ReLU), hence no __restrict__. T: the storage type (cuda_dtype.cuh).
template <class T>
__global__ void relu_forward_kernel(size_t n, const T* x, T* y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = widen(x[i]);
    y[i] = narrow<T>(v > 0.f ? v : 0.f);
  }
}

template <class T>
__global__ void relu_backward_kernel(size_t n, const T* y, const T* dy, T* dx) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dx[i] = narrow<T>(widen(y[i]) > 0.f ? widen(dy[i]) : 0.f);
}

// x and y may alias (in-place forward). K: the activation's kind (act_value: kernels/activation.h).
template <class T, ActKind K>
__global__ void activation_forward_kernel(size_t n, float alpha, float beta, const T* x, T* y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = narrow<T>(act_value<K>(widen(x[i]), alpha, beta));
}

// dx (+)= dy * f'(x); dx may alias dy.
template <class T, ActKind K>
__global__ void activation_backward_kernel(size_t n, float alpha, float beta, bool accumulate, const T* x,
                                           const T* dy, T* dx) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = widen(dy[i]) * act_derivative<K>(widen(x[i]), alpha, beta);
    dx[i] = narrow<T>(accumulate ? widen(dx[i]) + g : g);
  }
}

template <class T>
__global__ void widen_kernel(size_t n, const T* __restrict__ x, float* __restrict__ y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = widen(x[i]);
}

template <class T>
__global__ void narrow_kernel(size_t n, const float* __restrict__ x, T* __restrict__ y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = narrow<T>(x[i]);
}

template <class T>
__global__ void add_widened_kernel(size_t n, const T* __restrict__ x, float* __restrict__ y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] += widen(x[i]);
}

template <class T>
cudaError_t relu_forward_t(size_t n, const T* d_x, T* d_y, cudaStream_t stream) {
  auto* kernel = &relu_forward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_x, d_y);
}

template <class T>
cudaError_t relu_backward_t(size_t n, const T* d_y, const T* d_dy, T* d_dx, cudaStream_t stream) {
  auto* kernel = &relu_backward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_y, d_dy, d_dx);
}

template <class T>
cudaError_t convert_t(size_t n, const T* d_x, float* d_y, cudaStream_t stream) {
  auto* kernel = &widen_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_x, d_y);
}

template <class T>
cudaError_t convert_t(size_t n, const float* d_x, T* d_y, cudaStream_t stream) {
  auto* kernel = &narrow_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_x, d_y);
}

}  // namespace

cudaError_t fill_cuda(size_t n, float value, float* d_x, cudaStream_t stream) {
  return CNN_LAUNCH(fill_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, value, d_x);
}

cudaError_t relu_forward_cuda(DType t, size_t n, const void* d_x, void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return relu_forward_t(n, static_cast<const T*>(d_x), static_cast<T*>(d_y), stream);
  });
}

cudaError_t relu_backward_cuda(DType t, size_t n, const void* d_y, const void* d_dy, void* d_dx,
                               cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return relu_backward_t(n, static_cast<const T*>(d_y), static_cast<const T*>(d_dy), static_cast<T*>(d_dx), stream);
  });
}

cudaError_t activation_forward_cuda(DType t, const Activation& a, size_t n, const void* d_x, void* d_y,
                                    cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  act_dispatch(a.kind, [&](auto kind) {
    err = dispatch(t, [&](auto* tag) {
      using T = StorageOf<decltype(tag)>;
      auto* kernel = &activation_forward_kernel<T, decltype(kind)::kind>;
      return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, a.alpha, a.beta,
                        static_cast<const T*>(d_x), static_cast<T*>(d_y));
    });
  });
  return err;
}

cudaError_t activation_backward_cuda(DType t, const Activation& a, size_t n, const void* d_x, const void* d_dy,
                                     void* d_dx, bool accumulate, cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  act_dispatch(a.kind, [&](auto kind) {
    err = dispatch(t, [&](auto* tag) {
      using T = StorageOf<decltype(tag)>;
      auto* kernel = &activation_backward_kernel<T, decltype(kind)::kind>;
      return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, a.alpha, a.beta, accumulate,
                        static_cast<const T*>(d_x), static_cast<const T*>(d_dy), static_cast<T*>(d_dx));
    });
  });
  return err;
}

cudaError_t convert_cuda(size_t n, DType from, const void* d_x, DType to, void* d_y, cudaStream_t stream) {
  if (from == to) return cudaMemcpyAsync(d_y, d_x, n * dtype_size(from), cudaMemcpyDeviceToDevice, stream);
  if (from == DType::kF32)
    return dispatch_16(to, [&](auto* tag) {
      return convert_t(n, static_cast<const float*>(d_x), static_cast<StorageOf<decltype(tag)>*>(d_y), stream);
    });
  if (to == DType::kF32)
    return dispatch_16(from, [&](auto* tag) {
      return convert_t(n, static_cast<const StorageOf<decltype(tag)>*>(d_x), static_cast<float*>(d_y), stream);
    });
  return cudaErrorInvalidValue;  // between the two 16-bit types: nothing needs it
}

cudaError_t add_widened_cuda(DType t, size_t n, const void* d_x, float* d_y, cudaStream_t stream) {
  return dispatch_16(t, [&](auto* tag) {
    auto* kernel = &add_widened_kernel<StorageOf<decltype(tag)>>;
    return CNN_LAUNCH(kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n,
                      static_cast<const StorageOf<decltype(tag)>*>(d_x), d_y);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
