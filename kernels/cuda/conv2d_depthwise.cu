// Depthwise convolution (ConvDesc::groups == c, k = c * multiplier: MobileNet, EfficientNet): each output
// channel reads one input channel, so the implicit GEMM of conv2d.cu would be c GEMMs of one reduction column
// each. Instead one thread per output (forward) or input (backward-data) element walks its window in the
// reference's (r, s) order (kernels/window.h), channels fastest so that neighbouring threads read neighbouring
// addresses; the filter gradient reduces over n*p*q in blocks of 32 channels x 8 row lanes.
#include <algorithm>

#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/window.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;
constexpr int kLanes = 32, kRowLanes = 8;  // filter gradient: channels x row lanes per block

struct DwGeom {  // ConvDesc's sizes as plain ints (its p()/q() are host functions)
  int n, c, k, p, q, mult;
  Window win;
};
DwGeom dw_geom(const ConvDesc& d) { return {d.n, d.c, d.k, d.p(), d.q(), d.k / d.c, window_of(d)}; }

// T: the storage type of activations and filters (cuda_dtype.cuh); sums in fp32. Filters [k, r, s, 1].
template <class T>
__global__ void dw_forward_kernel(DwGeom g, const T* __restrict__ x, const T* __restrict__ w,
                                  const float* __restrict__ b, T* __restrict__ y) {
  const int rs = g.win.r * g.win.s;
  for_each_nhwc(g.n, g.p, g.q, g.k, [&](size_t o, Nhwc at) {
    const int c = at.c / g.mult;
    const T* wk = w + static_cast<size_t>(at.c) * rs;
    float acc = b ? b[at.c] : 0.f;
    for_each_tap(g.win, at.n, at.h, at.w,
                 [&](size_t pixel, int tap) { acc += widen(x[pixel * g.c + c]) * widen(wk[tap]); });
    y[o] = narrow<T>(acc);
  });
}

// dx[n, h, w, c] = the sum over c's output channels k and the taps (r, s) whose output (p, q) reads (h, w).
template <class T>
__global__ void dw_backward_data_kernel(DwGeom g, const T* __restrict__ dy, const T* __restrict__ w,
                                        T* __restrict__ dx) {
  const Window& v = g.win;
  for_each_nhwc(g.n, v.h, v.w, g.c, [&](size_t i, Nhwc at) {
    float acc = 0.f;
    for (int j = 0; j < g.mult; ++j) {
      const int k = at.c * g.mult + j;
      for (int r = 0; r < v.r; ++r) {
        const int ph = at.h + v.pad_h - r * v.dilation_h;
        if (ph < 0 || ph % v.stride_h != 0 || ph / v.stride_h >= g.p) continue;
        for (int s = 0; s < v.s; ++s) {
          const int qw = at.w + v.pad_w - s * v.dilation_w;
          if (qw < 0 || qw % v.stride_w != 0 || qw / v.stride_w >= g.q) continue;
          const size_t o = ((static_cast<size_t>(at.n) * g.p + ph / v.stride_h) * g.q + qw / v.stride_w) * g.k + k;
          acc += widen(dy[o]) * widen(w[(static_cast<size_t>(k) * v.r + r) * v.s + s]);
        }
      }
    }
    dx[i] = narrow<T>(acc);
  });
}

// dw[k, tap] += sum over the output pixels of dy[pixel, k] * x[the tap's input pixel, k / mult]. Block
// (kLanes, kRowLanes) takes channels blockIdx.x * kLanes + [0, kLanes) and the pixels of its grid row;
// partial sums meet in one atomicAdd per block and element (grid rows: 1 when deterministic).
template <class T>
__global__ void __launch_bounds__(kLanes * kRowLanes)
    dw_backward_filter_kernel(DwGeom g, const T* __restrict__ x, const T* __restrict__ dy, float* __restrict__ dw) {
  CNN_SHARED(float, part, [kRowLanes][kLanes]);
  const Window& v = g.win;
  const int k = blockIdx.x * kLanes + threadIdx.x, c = k / g.mult, pixels = g.n * g.p * g.q;
  for (int r = 0; r < v.r; ++r)
    for (int s = 0; s < v.s; ++s) {
      float acc = 0.f;
      if (k < g.k)
        for (int m = blockIdx.y * kRowLanes + threadIdx.y; m < pixels; m += gridDim.y * kRowLanes) {
          const int q = m % g.q, p = m / g.q % g.p, n = m / g.q / g.p;
          const int h = p * v.stride_h - v.pad_h + r * v.dilation_h, w = q * v.stride_w - v.pad_w + s * v.dilation_w;
          if (h < 0 || h >= v.h || w < 0 || w >= v.w) continue;
          acc += widen(dy[static_cast<size_t>(m) * g.k + k]) *
                 widen(x[((static_cast<size_t>(n) * v.h + h) * v.w + w) * g.c + c]);
        }
      part[threadIdx.y][threadIdx.x] = acc;
      __syncthreads();
      if (threadIdx.y == 0 && k < g.k) {
        for (int i = 1; i < kRowLanes; ++i) acc += part[i][threadIdx.x];
        atomicAdd(&dw[(static_cast<size_t>(k) * v.r + r) * v.s + s], acc);
      }
      __syncthreads();  // part is written again for the next tap
    }
}

}  // namespace

cudaError_t depthwise_forward_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_w, const float* d_b,
                                   void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &dw_forward_kernel<T>;
    const size_t outs = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    return CNN_LAUNCH(kernel, grid_stride_blocks(outs, kBlock), kBlock, 0, stream, dw_geom(d),
                      static_cast<const T*>(d_x), static_cast<const T*>(d_w), d_b, static_cast<T*>(d_y));
  });
}

cudaError_t depthwise_backward_data_cuda(DType t, const ConvDesc& d, const void* d_dy, const void* d_w, void* d_dx,
                                         cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &dw_backward_data_kernel<T>;
    const size_t ins = static_cast<size_t>(d.n) * d.h * d.w * d.c;
    return CNN_LAUNCH(kernel, grid_stride_blocks(ins, kBlock), kBlock, 0, stream, dw_geom(d),
                      static_cast<const T*>(d_dy), static_cast<const T*>(d_w), static_cast<T*>(d_dx));
  });
}

cudaError_t depthwise_backward_filter_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_dy,
                                           float* d_dw, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    auto* kernel = &dw_backward_filter_kernel<T>;
    // Enough row slices to fill the device: about 8 blocks per multiprocessor in all.
    const int channel_blocks = (d.k + kLanes - 1) / kLanes;
    const int pixels = d.n * d.p() * d.q();
    const int want = std::min((pixels + kRowLanes * 16 - 1) / (kRowLanes * 16),
                              std::max(1, multiprocessor_count() * 8 / channel_blocks));
    const dim3 grid(channel_blocks, reduction_blocks(want, stream));
    return CNN_LAUNCH(kernel, grid, dim3(kLanes, kRowLanes), 0, stream, dw_geom(d), static_cast<const T*>(d_x),
                      static_cast<const T*>(d_dy), d_dw);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
