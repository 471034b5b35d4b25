// Convolution as implicit GEMM over NHWC activations and KRSC filters (gemm_tile.cuh): the im2col matrix is
// never stored; the tile loaders compute each patch element's address, or zero in the padding.
//   forward          y[npq, k]  = sum_{rsc} x[n, p*sh-ph+r, q*sw-pw+s, c] * w[k, rsc]
//   backward-data    dx[nhw, c] = sum_{rsk} dy[n, (h+ph-r)/sh, (w+pw-s)/sw, k] * w[k, r, s, c]  (exact divisions)
//   backward-filter  dw[k, rsc] += sum_{npq} dy[npq, k] * x[n, p*sh-ph+r, q*sw-pw+s, c]
#include "kernels/cuda_ops.h"
#include "kernels/gemm_tile.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

// ConvDesc's members as plain ints (its p()/q() are host functions).
struct ConvGeom {
  int n, h, w, c, k, r, s, stride_h, stride_w, pad_h, pad_w, p, q;
};

ConvGeom geom(const ConvDesc& d) {
  return {d.n, d.h, d.w, d.c, d.k, d.r, d.s, d.stride_h, d.stride_w, d.pad_h, d.pad_w, d.p(), d.q()};
}

// x[n, h, w, c] for output pixel m = (n, p, q) and filter tap j = (r, s, c); zero in the padding.
__device__ __forceinline__ float patch(const ConvGeom& g, const float* x, int m, int j) {
  const int q = m % g.q, np = m / g.q;
  const int p = np % g.p, n = np / g.p;
  const int c = j % g.c, rs = j / g.c;
  const int s = rs % g.s, r = rs / g.s;
  const int h = p * g.stride_h - g.pad_h + r, w = q * g.stride_w - g.pad_w + s;
  if (h < 0 || h >= g.h || w < 0 || w >= g.w) return 0.f;
  return x[((static_cast<size_t>(n) * g.h + h) * g.w + w) * g.c + c];
}

// The im2col matrix [npq, rsc]: A of the forward GEMM, B of the filter-gradient GEMM.
struct Patches {
  ConvGeom g;
  const float* x;
  __device__ float operator()(int m, int j) const { return patch(g, x, m, j); }
};

// Backward-data reduction index j = (r, s, k), k fastest so that dy reads are contiguous.
struct DataGradRows {  // A(m = nhw, j = rsk) = dy[n, p, q, k] where input (h, w) is tap (r, s) of output (p, q)
  ConvGeom g;
  const float* dy;
  __device__ float operator()(int m, int j) const {
    const int k = j % g.k, rs = j / g.k;
    const int s = rs % g.s, r = rs / g.s;
    const int w = m % g.w, nh = m / g.w;
    const int h = nh % g.h, n = nh / g.h;
    const int ph = h + g.pad_h - r, qw = w + g.pad_w - s;
    if (ph < 0 || qw < 0 || ph % g.stride_h != 0 || qw % g.stride_w != 0) return 0.f;
    const int p = ph / g.stride_h, q = qw / g.stride_w;
    if (p >= g.p || q >= g.q) return 0.f;
    return dy[((static_cast<size_t>(n) * g.p + p) * g.q + q) * g.k + k];
  }
};

struct DataGradFilters {  // B(j = rsk, c) = w[k, r, s, c]
  ConvGeom g;
  const float* w;
  __device__ float operator()(int j, int c) const {
    const int k = j % g.k, rs = j / g.k;
    return w[(static_cast<size_t>(k) * g.r * g.s + rs) * g.c + c];
  }
};

}  // namespace

cudaError_t conv2d_forward_cuda(const ConvDesc& d, const float* d_x, const float* d_w, const float* d_b, float* d_y,
                                cudaStream_t stream) {
  const ConvGeom g = geom(d);
  const int rsc = g.r * g.s * g.c;
  return launch_gemm_tile(g.n * g.p * g.q, g.k, rsc, false, Patches{g, d_x}, Transposed{d_w, rsc},
                          StoreBias{d_y, g.k, d_b}, stream);
}

cudaError_t conv2d_backward_data_cuda(const ConvDesc& d, const float* d_dy, const float* d_w, float* d_dx,
                                      cudaStream_t stream) {
  const ConvGeom g = geom(d);
  return launch_gemm_tile(g.n * g.h * g.w, g.c, g.r * g.s * g.k, false, DataGradRows{g, d_dy},
                          DataGradFilters{g, d_w}, StoreBias{d_dx, g.c, nullptr}, stream);
}

cudaError_t conv2d_backward_filter_cuda(const ConvDesc& d, const float* d_x, const float* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream) {
  const ConvGeom g = geom(d);
  const int rsc = g.r * g.s * g.c, npq = g.n * g.p * g.q;
  cudaError_t err = launch_gemm_tile(g.k, rsc, npq, true, Transposed{d_dy, g.k}, Patches{g, d_x},
                                     StoreAccumulate{d_dw, rsc}, stream);
  if (err == cudaSuccess && d_db) err = column_sum_cuda(npq, g.k, d_dy, d_db, stream);
  return err;
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
