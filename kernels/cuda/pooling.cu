// Max and average pooling over NHWC, one thread per output (forward) or input (backward) element in
// grid-stride loops; channels are the fastest index, so neighbouring threads touch neighbouring addresses.
// Backward passes gather rather than scatter: no atomics, no zeroing pass, the reference's summation order.
#include <climits>

#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/window.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

struct PoolGeom {  // PoolDesc's sizes as plain ints (its p()/q() are host functions)
  int n, c, p, q;
  Window win;
  AvgCount avg;
};

// T: the storage type of x and y (cuda_dtype.cuh); comparisons and sums in fp32.
template <class T>
__global__ void maxpool_forward_kernel(PoolGeom g, const T* __restrict__ x, bool relu, T* __restrict__ y,
                                       int32_t* __restrict__ argmax) {
  for_each_nhwc(g.n, g.p, g.q, g.c, [&](size_t o, Nhwc at) {
    float best = -INFINITY;
    int32_t arg = -1;
    for_each_tap(g.win, at.n, at.h, at.w, [&](size_t pixel, int) {
      const int32_t i = static_cast<int32_t>(pixel * g.c + at.c);
      // As in the CPU reference: first maximum wins ties, and a NaN wins so that it propagates.
      const float v = widen(x[i]);
      if (arg < 0 || !(v <= best)) {
        best = v;
        arg = i;
      }
    });
    y[o] = narrow<T>(relu && !(best > 0.f) ? 0.f : best);
    argmax[o] = arg;
  });
}

// The pooling windows (output rows p_lo..p_hi, columns q_lo..q_hi) that contain input element `at`, i.e.
// p*stride - pad <= h <= p*stride - pad + r - 1; shared by the gathering backward kernels.
struct Windows {
  int p_lo, p_hi, q_lo, q_hi;
};

__device__ __forceinline__ Windows windows_of(const PoolGeom& g, const Nhwc& at) {
  const Window& v = g.win;
  return {max(0, (at.h + v.pad_h - v.r + v.stride_h) / v.stride_h), min(g.p - 1, (at.h + v.pad_h) / v.stride_h),
          max(0, (at.w + v.pad_w - v.s + v.stride_w) / v.stride_w), min(g.q - 1, (at.w + v.pad_w) / v.stride_w)};
}

// dx[i] = sum of dy over the windows containing input i whose winner was i (and whose relu_y > 0 when
// given), in (p, q) order.
template <class T>
__global__ void maxpool_backward_kernel(PoolGeom g, const T* __restrict__ dy, const T* __restrict__ relu_y,
                                        const int32_t* __restrict__ argmax, T* __restrict__ dx) {
  for_each_nhwc(g.n, g.win.h, g.win.w, g.c, [&](size_t i, Nhwc at) {
    const Windows win = windows_of(g, at);
    float acc = 0.f;
    for (int p = win.p_lo; p <= win.p_hi; ++p)
      for (int q = win.q_lo; q <= win.q_hi; ++q) {
        const size_t o = ((static_cast<size_t>(at.n) * g.p + p) * g.q + q) * g.c + at.c;
        if (argmax[o] == static_cast<int32_t>(i) && (!relu_y || widen(relu_y[o]) > 0.f)) acc += widen(dy[o]);
      }
    dx[i] = narrow<T>(acc);
  });
}

// Average over the in-bounds taps (divided by their count, or with count_include_pad by the taps inside the
// padded input: avg_divisor), in the reference's order: sum, then multiply by the reciprocal.
template <class T>
__global__ void avgpool_forward_kernel(PoolGeom g, const T* __restrict__ x, T* __restrict__ y) {
  for_each_nhwc(g.n, g.p, g.q, g.c, [&](size_t o, Nhwc at) {
    float acc = 0.f;
    const int taps = for_each_tap(g.win, at.n, at.h, at.w,
                                  [&](size_t pixel, int) { acc += widen(x[pixel * g.c + at.c]); });
    y[o] = narrow<T>(acc * (taps ? 1.0f / avg_divisor(g.win, g.avg, at.h, at.w) : 0.f));
  });
}

// dx[i] = sum over the windows containing input i of dy / taps, gathered in (p, q) order like the reference.
template <class T>
__global__ void avgpool_backward_kernel(PoolGeom g, const T* __restrict__ dy, T* __restrict__ dx) {
  for_each_nhwc(g.n, g.win.h, g.win.w, g.c, [&](size_t i, Nhwc at) {
    const Windows win = windows_of(g, at);
    float acc = 0.f;
    for (int p = win.p_lo; p <= win.p_hi; ++p)
      for (int q = win.q_lo; q <= win.q_hi; ++q)
        acc += widen(dy[((static_cast<size_t>(at.n) * g.p + p) * g.q + q) * g.c + at.c]) *
               (1.0f / avg_divisor(g.win, g.avg, p, q));
    dx[i] = narrow<T>(acc);
  });
}

PoolGeom geom(const PoolDesc& d) { return {d.n, d.c, d.p(), d.q(), window_of(d), avg_count_of(d)}; }
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
