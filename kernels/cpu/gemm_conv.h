// Convolutions over NHWC as cnntrain's own packed fp32 matrix products on AVX2/FMA ("implicit GEMM": no im2col
// copy), which the fast CPU backend runs below AVX-512 for the layers where oneDNN 2.7's direct kernels are slow
// there (docs/perf.md, ninth pass: ResNet-50's stride-2 3x3 layers ran at 17-30% of the FMA peak).
// With the output pixels i = (n, p, q) as rows, the filter taps and input channels (r, s, c) as the summed index,
// and the filters w [K, R, S, C] (OHWI):
//   forward           y[i, k]        = sum over (r, s, c) of x[pixel(i, r, s), c] w[k, r, s, c]   (+ b[k])
//   backward-weights  dw[k, r, s, c] += sum over i of dy[i, k] x[pixel(i, r, s), c]
//   backward-data     dx[pixel(i, r, s), c] += dy[i, k] w[k, r, s, c]: for each class of input pixels that
//                     take the same taps (stride 2: four), a product over those taps and k
// (taps falling on padding read zeros); with stride 1 the one class is dx itself, written in place.
// One kernel computes 6 x 16 blocks of the result over slices of up to 256 of the summed index (never across a
// tap) from a packed copy of the right-hand operand (16 columns per sliver), reading the left-hand one in place
// through a table of row addresses (or from a copy in panels of 6 rows where its rows are strided). Every result
// element is one sum taken in the same order (ascending over the summed index, slice by slice) whichever thread
// computes it, or, for a long sum into a small result (an RGB first layer's filter gradient: at most 65536
// results, 32 slices or more), eight fixed parts of it summed in order: the same bits for any thread count.
// Rounding differs from oneDNN's kernels, which split the sums differently: the usual few ulps of the sums'
// magnitude.
#pragma once
#include "kernels/backend.h"

namespace cnn {

// Whether the calls below take `d`: groups 1, no dilation, symmetric padding smaller than the taps, NHWC, an
// AVX2/FMA build, and C % 16 == 0 unless the taps are 1x1 (the filter gradient's packed columns never straddle two
// taps).
bool gemm_conv_ok(const ConvDesc& d);
// Whether gemm_conv_backward_filter takes `d`: also with any channel count when the filter has at most 1024
// elements per output channel (R * S * C: an RGB first layer's 7x7x3), whose packed columns straddle taps.
bool gemm_conv_filter_ok(const ConvDesc& d);

// y = conv(x, w) + b (b may be null).
void gemm_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
// dx = dL/dx (overwritten), any stride.
void gemm_conv_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx);
// dw += dL/dw; db += dL/db when db is not null (sums of dy over the pixels, in pixel order).
void gemm_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw, float* db);

// The product behind them on plain strided matrices, exposed for tests: c[i * ldc + j] (+)= sum over q < kdim of
// A(i, q) B(q, j) (+ bias[j]), for i < m, j < n, with A(i, q) = a[i * a_rs + q * a_cs] and B(q, j) =
// b[q * b_rs + j * b_cs]. `accumulate` adds to c instead of overwriting it; bias (may be null) only without it.
struct GemmArgs {
  long m = 0, n = 0, kdim = 0;
  const float* a = nullptr;
  long a_rs = 0, a_cs = 0;
  const float* b = nullptr;
  long b_rs = 0, b_cs = 0;
  float* c = nullptr;
  long ldc = 0;
  bool accumulate = false;
  const float* bias = nullptr;
};
void packed_gemm(int threads, const GemmArgs& g);

}  // namespace cnn
