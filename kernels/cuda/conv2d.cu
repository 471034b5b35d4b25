// Convolution as implicit GEMM over NHWC activations and KRSC filters (gemm_tile.cuh): the im2col matrix is
// never stored; the tile loaders compute each patch element's address, or zero in the padding. With dilation
// (dh, dw) tap (r, s) reads input row p*sh-ph+r*dh, column q*sw-pw+s*dw; padding after the input
// (extra_pad_h/w) only adds outputs. Per group (one GEMM each; c, k below are a group's channels, filters
// [k, r, s, c/groups]):
//   forward          y[npq, k]  = sum_{rsc} x[n, p*sh-ph+r, q*sw-pw+s, c] * w[k, rsc]
//   backward-data    dx[nhw, c] = sum_{rsk} dy[n, (h+ph-r)/sh, (w+pw-s)/sw, k] * w[k, r, s, c]  (exact divisions)
//   backward-filter  dw[k, rsc] += sum_{npq} dy[npq, k] * x[n, p*sh-ph+r, q*sw-pw+s, c]
// Depthwise convolutions (one input channel per group) take the kernels of conv2d_depthwise.cu instead.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_wmma.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

// ConvDesc's members as plain ints plus the divisors of the index math (its p()/q() are host functions). c and
// k: all channels (the strides of x, y and their gradients); cg and kg: one group's (div_c, div_k divide by
// them).
struct ConvGeom {
  int n, h, w, c, k, r, s, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, p, q, cg, kg;
  FastDiv div_q, div_p, div_c, div_s, div_w, div_h, div_k, div_sh, div_sw;
};

ConvGeom geom(const ConvDesc& d) {
  ConvGeom g{};
  g.n = d.n, g.h = d.h, g.w = d.w, g.c = d.c, g.k = d.k, g.r = d.r, g.s = d.s;
  g.stride_h = d.stride_h, g.stride_w = d.stride_w, g.pad_h = d.pad_h, g.pad_w = d.pad_w;
  g.dil_h = d.dilation_h, g.dil_w = d.dilation_w, g.p = d.p(), g.q = d.q(), g.cg = d.c / d.groups;
  g.kg = d.k / d.groups;
  g.div_q = FastDiv(g.q), g.div_p = FastDiv(g.p), g.div_c = FastDiv(g.cg), g.div_s = FastDiv(g.s);
  g.div_w = FastDiv(g.w), g.div_h = FastDiv(g.h), g.div_k = FastDiv(g.kg);
  g.div_sh = FastDiv(g.stride_h), g.div_sw = FastDiv(g.stride_w);
  return g;
}

// i = (hi * m + mid) * n + lo with 0 <= mid < m, 0 <= lo < n: returns hi, sets mid and lo.
__device__ __forceinline__ int unflatten3(int i, const FastDiv& n, const FastDiv& m, int& mid, int& lo) {
  return m.divmod(n.divmod(i, lo), mid);
}

// An output pixel m = (n, p, q) as the corner of its receptive field: offset of x[n, h0, w0, 0] (negative
// in the padding) and h0 = p*sh - ph, w0 = q*sw - pw.
struct Pixel {
  int off, h0, w0;
  __device__ static Pixel of(const ConvGeom& g, int m) {
    int p, q;
    const int n = unflatten3(m, g.div_q, g.div_p, p, q);
    const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
    return {((n * g.h + h0) * g.w + w0) * g.c, h0, w0};
  }
};
// A filter tap j = (r, s, c): its offset from the corner, and its row and column offsets (r*dh, s*dw) for the
// bounds check.
struct Tap {
  int off, r, s;
  __device__ static Tap of(const ConvGeom& g, int j) {
    int s, c;
    const int r = unflatten3(j, g.div_c, g.div_s, s, c) * g.dil_h;
    s *= g.dil_w;
    return {(r * g.w + s) * g.c + c, r, s};
  }
};
// x at tap t of pixel px; zero in the padding (the unsigned compares also reject negative coordinates). T: the
// storage type of activations and filters (cuda_dtype.cuh); loads widen to fp32.
template <class T>
__device__ __forceinline__ float patch_at(const ConvGeom& g, const T* x, const Pixel& px, const Tap& t) {
  const bool in = static_cast<unsigned>(px.h0 + t.r) < static_cast<unsigned>(g.h) &&
                  static_cast<unsigned>(px.w0 + t.s) < static_cast<unsigned>(g.w);
  return in ? widen(x[px.off + t.off]) : 0.f;
}
template <class T>
__device__ __forceinline__ float patch_at(const ConvGeom& g, const T* x, const Tap& t, const Pixel& px) {
  return patch_at(g, x, px, t);
}

// The im2col matrix [npq, rsc] as a GEMM operand: with the output pixel outer (Outer = Pixel), A of the forward
// GEMM; with the tap outer and the pixel as the reduction index (Outer = Tap), B of the filter-gradient GEMM.
template <class T, class O, class I>
struct Patches {
  ConvGeom g;
  const T* x;
  using Storage = T;
  using Outer = O;
  using Inner = I;
  __device__ Outer outer(int i) const { return O::of(g, i); }
  __device__ Inner inner(int i) const { return I::of(g, i); }
  __device__ float at(const O& o, const I& i) const { return patch_at(g, x, o, i); }
};
template <class T>
using PatchesByPixel = Patches<T, Pixel, Tap>;
template <class T>
using PatchesByTap = Patches<T, Tap, Pixel>;

// Backward data, A(m = nhw, j = rsk) = dy[n, p, q, k] where input (h, w) is tap (r, s) of output (p, q); the
// reduction index runs k fastest so that dy reads are contiguous.
struct InputPixel {  // offset of dy[n, 0, 0, 0] and h + ph, w + pw
  int off, hp, wp;
};
struct TapChannel {  // r*dh, s*dw and k of j = (r, s, k)
  int r, s, k;
};
template <class T>
struct DataGradRows {
  ConvGeom g;
  const T* dy;
  using Storage = T;
  using Outer = InputPixel;
  using Inner = TapChannel;
  __device__ Outer outer(int m) const {
    int h, w;
    const int n = unflatten3(m, g.div_w, g.div_h, h, w);
    return {n * g.p * g.q * g.k, h + g.pad_h, w + g.pad_w};
  }
  __device__ Inner inner(int j) const {
    int s, k;
    const int r = unflatten3(j, g.div_k, g.div_s, s, k);
    return {r * g.dil_h, s * g.dil_w, k};
  }
  __device__ float at(const InputPixel& px, const TapChannel& t) const {
    const int ph = px.hp - t.r, qw = px.wp - t.s;
    if (ph < 0 || qw < 0) return 0.f;
    int rem_h, rem_w;
    const int p = g.div_sh.divmod(ph, rem_h), q = g.div_sw.divmod(qw, rem_w);
    if (rem_h != 0 || rem_w != 0 || p >= g.p || q >= g.q) return 0.f;
    return widen(dy[px.off + (p * g.q + q) * g.k + t.k]);
  }
};

// Backward data, B(j = rsk, c) = w[k, r, s, c].
template <class T>
struct DataGradFilters {
  ConvGeom g;
  const T* w;
  using Storage = T;
  using Outer = int;  // c
  using Inner = int;  // offset of w[k, r, s, 0]
  __device__ Outer outer(int c) const { return c; }
  __device__ Inner inner(int j) const {
    int k;
    const int rs = g.div_k.divmod(j, k);
    return (k * g.r * g.s + rs) * g.cg;
  }
  __device__ float at(int c, int off) const { return widen(w[off + c]); }
};

// The launchers run one GEMM per group, on pointers advanced to the group's channels and filters.
template <class T>
cudaError_t conv2d_forward_t(const ConvDesc& d, const T* d_x, const T* d_w, const float* d_b, T* d_y,
                             cudaStream_t stream) {
  const ConvGeom g = geom(d);
  const int rsc = g.r * g.s * g.cg;
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < d.groups && err == cudaSuccess; ++i)
    err = launch_gemm(g.n * g.p * g.q, g.kg, rsc, false, PatchesByPixel<T>{g, d_x + i * g.cg},
                      MatRows<T>{d_w + static_cast<size_t>(i) * g.kg * rsc, rsc},
                      StoreBias<T>{d_y + i * g.kg, g.k, d_b ? d_b + i * g.kg : nullptr}, stream);
  return err;
}

template <class T>
cudaError_t conv2d_backward_data_t(const ConvDesc& d, const T* d_dy, const T* d_w, T* d_dx, cudaStream_t stream) {
  const ConvGeom g = geom(d);
  const size_t group_filters = static_cast<size_t>(g.kg) * g.r * g.s * g.cg;
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < d.groups && err == cudaSuccess; ++i)
    err = launch_gemm(g.n * g.h * g.w, g.cg, g.r * g.s * g.kg, false, DataGradRows<T>{g, d_dy + i * g.kg},
                      DataGradFilters<T>{g, d_w + i * group_filters}, StoreBias<T>{d_dx + i * g.cg, g.c, nullptr},
                      stream);
  return err;
}

template <class T>
cudaError_t conv2d_backward_filter_t(const ConvDesc& d, const T* d_x, const T* d_dy, float* d_dw, float* d_db,
                                     cudaStream_t stream) {
  const ConvGeom g = geom(d);
  const int rsc = g.r * g.s * g.cg, npq = g.n * g.p * g.q;
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < d.groups && err == cudaSuccess; ++i)
    err = launch_gemm(g.kg, rsc, npq, true, MatCols<T>{d_dy + i * g.kg, g.k}, PatchesByTap<T>{g, d_x + i * g.cg},
                      StoreAccumulate{d_dw + static_cast<size_t>(i) * g.kg * rsc, rsc}, stream);
  // The bias gradient: column sums of dy [npq, k].
  if (err == cudaSuccess && d_db) err = column_sum_cuda(dtype_of<T>(), npq, g.k, d_dy, d_db, stream);
  return err;
}

// One input channel per group: the depthwise kernels (conv2d_depthwise.cu).
bool depthwise(const ConvDesc& d) { return d.groups > 1 && d.groups == d.c; }

}  // namespace

cudaError_t conv2d_forward_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_w, const float* d_b,
                                void* d_y, cudaStream_t stream) {
  if (depthwise(d)) return depthwise_forward_cuda(t, d, d_x, d_w, d_b, d_y, stream);
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return conv2d_forward_t(d, static_cast<const T*>(d_x), static_cast<const T*>(d_w), d_b, static_cast<T*>(d_y),
                            stream);
  });
}

cudaError_t conv2d_backward_data_cuda(DType t, const ConvDesc& d, const void* d_dy, const void* d_w, void* d_dx,
                                      cudaStream_t stream) {
  if (depthwise(d)) return depthwise_backward_data_cuda(t, d, d_dy, d_w, d_dx, stream);
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return conv2d_backward_data_t(d, static_cast<const T*>(d_dy), static_cast<const T*>(d_w), static_cast<T*>(d_dx),
                                  stream);
  });
}

cudaError_t conv2d_backward_filter_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream) {
  if (depthwise(d)) {
    cudaError_t err = depthwise_backward_filter_cuda(t, d, d_x, d_dy, d_dw, stream);
    if (err == cudaSuccess && d_db) err = column_sum_cuda(t, d.n * d.p() * d.q(), d.k, d_dy, d_db, stream);
    return err;
  }
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return conv2d_backward_filter_t(d, static_cast<const T*>(d_x), static_cast<const T*>(d_dy), d_dw, d_db, stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
