// The sliding window of convolution and pooling over NHWC input: output (p, q) sees input rows
// p*stride_h - pad_h + dilation_h*[0, r) and columns q*stride_w - pad_w + dilation_w*[0, s); taps in the padding
// are skipped. Padding after the input (ConvDesc/PoolDesc::extra_pad_h/w) only adds output rows and columns
// (p(), q()), whose taps past the input are skipped the same way.
// One walk for the CPU references (conv2d_cpu.cpp, pooling_cpu.cpp), the fast CPU pooling and the CUDA pooling
// kernels, so that all visit the taps in the same (r, s) order and their sums round identically.
#pragma once
#include <cstddef>

#include "kernels/backend.h"
#include "kernels/host_device.h"

namespace cnn {

struct Window {
  int h, w;                  // input rows and columns
  int r, s;                  // window rows and columns
  int stride_h, stride_w, pad_h, pad_w;
  int dilation_h = 1, dilation_w = 1;  // pooling windows are never dilated
};

inline Window window_of(const ConvDesc& d) {
  return {d.h, d.w, d.r, d.s, d.stride_h, d.stride_w, d.pad_h, d.pad_w, d.dilation_h, d.dilation_w};
}
inline Window window_of(const PoolDesc& d) { return {d.h, d.w, d.r, d.s, d.stride, d.stride, d.pad, d.pad}; }

// Calls f(pixel, tap) for each tap of output (n, p, q)'s window that lies inside the input, row by row:
// pixel = (n*h + row)*w + column, the input pixel's flat NHW index (times C: its channel 0 in NHWC), and
// tap = r_i*s + s_i, the filter position (KRSC filters hold it at (k*r*s + tap)*C). Returns the tap count.
template <class F>
CNN_HD int for_each_tap(const Window& g, int n, int p, int q, F&& f) {
  int taps = 0;
  for (int r = 0; r < g.r; ++r) {
    const int h = p * g.stride_h - g.pad_h + r * g.dilation_h;
    if (h < 0 || h >= g.h) continue;
    for (int s = 0; s < g.s; ++s) {
      const int w = q * g.stride_w - g.pad_w + s * g.dilation_w;
      if (w < 0 || w >= g.w) continue;
      f((static_cast<size_t>(n) * g.h + h) * g.w + w, r * g.s + s);
      ++taps;
    }
  }
  return taps;
}

// The count for_each_tap returns, without the walk (the divisor of an average), for undilated windows.
CNN_HD int window_taps(const Window& g, int p, int q) {
  const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
  const int h1 = h0 + g.r < g.h ? h0 + g.r : g.h, w1 = w0 + g.s < g.w ? w0 + g.s : g.w;
  const int rows = h1 - (h0 > 0 ? h0 : 0), cols = w1 - (w0 > 0 ? w0 : 0);
  return rows > 0 && cols > 0 ? rows * cols : 0;
}

// Average pooling's divisor at output (p, q): the window's taps inside the input, or with include_pad those
// inside the padded input, rows [-pad_h, end_h) and columns [-pad_w, end_w) (PoolDesc::count_include_pad).
struct AvgCount {
  int end_h, end_w;
  bool include_pad;
};
inline AvgCount avg_count_of(const PoolDesc& d) {
  return {d.h + d.pad + d.extra_pad_h, d.w + d.pad + d.extra_pad_w, d.count_include_pad};
}
CNN_HD int avg_divisor(const Window& g, const AvgCount& a, int p, int q) {
  if (!a.include_pad) return window_taps(g, p, q);
  const int h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
  const int h1 = h0 + g.r < a.end_h ? h0 + g.r : a.end_h, w1 = w0 + g.s < a.end_w ? w0 + g.s : a.end_w;
  return (h1 - h0) * (w1 - w0);
}

}  // namespace cnn
