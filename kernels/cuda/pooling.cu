// Max and average pooling over NHWC, one thread per output (forward) or input (backward) element in
// grid-stride loops; channels are the fastest index, so neighbouring threads touch neighbouring addresses.
// Backward passes gather rather than scatter: no atomics, no zeroing pass, the reference's summation order.
#include <climits>

#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

struct PoolGeom {  // PoolDesc's members as plain ints (its p()/q() are host functions)
  int n, h, w, c, r, s, stride, pad, p, q;
};

// T: the storage type of x and y (cuda_dtype.cuh); comparisons and sums in fp32.
template <class T>
__global__ void maxpool_forward_kernel(PoolGeom g, const T* __restrict__ x, bool relu, T* __restrict__ y,
                                       int32_t* __restrict__ argmax) {
  const size_t total = static_cast<size_t>(g.n) * g.p * g.q * g.c;
  for (size_t o = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(o % g.c);
    const size_t npq = o / g.c;
    const int q = static_cast<int>(npq % g.q), p = static_cast<int>(npq / g.q % g.p);
    const int n = static_cast<int>(npq / g.q / g.p);
    float best = -INFINITY;
    int32_t at = -1;
    for (int r = 0; r < g.r; ++r) {
      const int h = p * g.stride - g.pad + r;
      if (h < 0 || h >= g.h) continue;
      for (int s = 0; s < g.s; ++s) {
        const int w = q * g.stride - g.pad + s;
        if (w < 0 || w >= g.w) continue;
        const int32_t i = static_cast<int32_t>(((static_cast<size_t>(n) * g.h + h) * g.w + w) * g.c + c);
        // As in the CPU reference: first maximum wins ties, and a NaN wins so that it propagates.
        const float v = widen(x[i]);
        if (at < 0 || !(v <= best)) {
          best = v;
          at = i;
        }
      }
    }
    y[o] = narrow<T>(relu && !(best > 0.f) ? 0.f : best);
    argmax[o] = at;
  }
}

// The pooling windows (output rows p_lo..p_hi, columns q_lo..q_hi) that contain flat NHWC input element i,
// i.e. p*stride - pad <= h <= p*stride - pad + r - 1; shared by the gathering backward kernels.
struct Windows {
  int n, c, p_lo, p_hi, q_lo, q_hi;
};

__device__ __forceinline__ Windows windows_of(const PoolGeom& g, size_t i) {
  const size_t nhw = i / g.c;
  const int w = static_cast<int>(nhw % g.w), h = static_cast<int>(nhw / g.w % g.h);
  Windows win;
  win.c = static_cast<int>(i % g.c);
  win.n = static_cast<int>(nhw / g.w / g.h);
  win.p_lo = max(0, (h + g.pad - g.r + g.stride) / g.stride);
  win.p_hi = min(g.p - 1, (h + g.pad) / g.stride);
  win.q_lo = max(0, (w + g.pad - g.s + g.stride) / g.stride);
  win.q_hi = min(g.q - 1, (w + g.pad) / g.stride);
  return win;
}

// dx[i] = sum of dy over the windows containing input i whose winner was i (and whose relu_y > 0 when
// given), in (p, q) order.
template <class T>
__global__ void maxpool_backward_kernel(PoolGeom g, const T* __restrict__ dy, const T* __restrict__ relu_y,
                                        const int32_t* __restrict__ argmax, T* __restrict__ dx) {
  const size_t total = static_cast<size_t>(g.n) * g.h * g.w * g.c;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Windows win = windows_of(g, i);
    float acc = 0.f;
    for (int p = win.p_lo; p <= win.p_hi; ++p)
      for (int q = win.q_lo; q <= win.q_hi; ++q) {
        const size_t o = ((static_cast<size_t>(win.n) * g.p + p) * g.q + q) * g.c + win.c;
        if (argmax[o] == static_cast<int32_t>(i) && (!relu_y || widen(relu_y[o]) > 0.f)) acc += widen(dy[o]);
      }
    dx[i] = narrow<T>(acc);
  }
}

// Average over the in-bounds taps (padding excluded from the count), in the reference's order: sum, then
// multiply by 1/taps.
template <class T>
__global__ void avgpool_forward_kernel(PoolGeom g, const T* __restrict__ x, T* __restrict__ y) {
  const size_t total = static_cast<size_t>(g.n) * g.p * g.q * g.c;
  for (size_t o = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(o % g.c);
    const size_t npq = o / g.c;
    const int q = static_cast<int>(npq % g.q), p = static_cast<int>(npq / g.q % g.p);
    const int n = static_cast<int>(npq / g.q / g.p);
    float acc = 0.f;
    int taps = 0;
    for (int r = 0; r < g.r; ++r) {
      const int h = p * g.stride - g.pad + r;
      if (h < 0 || h >= g.h) continue;
      for (int s = 0; s < g.s; ++s) {
        const int w = q * g.stride - g.pad + s;
        if (w < 0 || w >= g.w) continue;
        acc += widen(x[((static_cast<size_t>(n) * g.h + h) * g.w + w) * g.c + c]);
        ++taps;
      }
    }
    y[o] = narrow<T>(acc * (taps ? 1.0f / taps : 0.f));
  }
}

// In-bounds taps of the window of output (p, q): the divisor of its average.
__device__ __forceinline__ int window_taps(const PoolGeom& g, int p, int q) {
  const int h0 = p * g.stride - g.pad, w0 = q * g.stride - g.pad;
  const int rows = min(h0 + g.r, g.h) - max(h0, 0), cols = min(w0 + g.s, g.w) - max(w0, 0);
  return rows > 0 && cols > 0 ? rows * cols : 0;
}

// dx[i] = sum over the windows containing input i of dy / taps, gathered in (p, q) order like the reference.
template <class T>
__global__ void avgpool_backward_kernel(PoolGeom g, const T* __restrict__ dy, T* __restrict__ dx) {
  const size_t total = static_cast<size_t>(g.n) * g.h * g.w * g.c;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const Windows win = windows_of(g, i);
    float acc = 0.f;
    for (int p = win.p_lo; p <= win.p_hi; ++p)
      for (int q = win.q_lo; q <= win.q_hi; ++q)
        acc += widen(dy[((static_cast<size_t>(win.n) * g.p + p) * g.q + q) * g.c + win.c]) *
               (1.0f / window_taps(g, p, q));
    dx[i] = narrow<T>(acc);
  }
}

PoolGeom geom(const PoolDesc& d) { return {d.n, d.h, d.w, d.c, d.r, d.s, d.stride, d.pad, d.p(), d.q()}; }
size_t out_size(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.c; }
size_t in_size(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }

template <class T>
cudaError_t maxpool_forward_t(const PoolDesc& d, const T* d_x, bool relu, T* d_y, int32_t* d_argmax,
                              cudaStream_t stream) {
  auto* kernel = &maxpool_forward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(out_size(d), kBlock), kBlock, 0, stream, geom(d), d_x, relu, d_y,
                    d_argmax);
}

template <class T>
cudaError_t maxpool_backward_t(const PoolDesc& d, const T* d_dy, const T* d_relu_y, const int32_t* d_argmax, T* d_dx,
                               cudaStream_t stream) {
  auto* kernel = &maxpool_backward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(in_size(d), kBlock), kBlock, 0, stream, geom(d), d_dy, d_relu_y,
                    d_argmax, d_dx);
}

template <class T>
cudaError_t avgpool_forward_t(const PoolDesc& d, const T* d_x, T* d_y, cudaStream_t stream) {
  auto* kernel = &avgpool_forward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(out_size(d), kBlock), kBlock, 0, stream, geom(d), d_x, d_y);
}

template <class T>
cudaError_t avgpool_backward_t(const PoolDesc& d, const T* d_dy, T* d_dx, cudaStream_t stream) {
  auto* kernel = &avgpool_backward_kernel<T>;
  return CNN_LAUNCH(kernel, grid_stride_blocks(in_size(d), kBlock), kBlock, 0, stream, geom(d), d_dy, d_dx);
}

}  // namespace

cudaError_t maxpool_forward_cuda(DType t, const PoolDesc& d, const void* d_x, bool relu, void* d_y,
                                 int32_t* d_argmax, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return maxpool_forward_t(d, static_cast<const T*>(d_x), relu, static_cast<T*>(d_y), d_argmax, stream);
  });
}

cudaError_t maxpool_backward_cuda(DType t, const PoolDesc& d, const void* d_dy, const void* d_relu_y,
                                  const int32_t* d_argmax, void* d_dx, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return maxpool_backward_t(d, static_cast<const T*>(d_dy), static_cast<const T*>(d_relu_y), d_argmax,
                              static_cast<T*>(d_dx), stream);
  });
}

cudaError_t avgpool_forward_cuda(DType t, const PoolDesc& d, const void* d_x, void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return avgpool_forward_t(d, static_cast<const T*>(d_x), static_cast<T*>(d_y), stream);
  });
}

cudaError_t avgpool_backward_cuda(DType t, const PoolDesc& d, const void* d_dy, void* d_dx, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return avgpool_backward_t(d, static_cast<const T*>(d_dy), static_cast<T*>(d_dx), stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
