// A ConvDesc in oneDNN's terms (kernels/cpu/dnnl_ops.cpp): logical NCHW dimensions, the filters' dimensions
// and their KRSC layout, strides, dilations and the padding on both sides.
#pragma once
#include <dnnl.hpp>

#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

struct DnnlConvShape {
  dnnl::memory::dims src, wei, dst, strides, dilates, pad_l, pad_r;
  // KRSC filters: `ohwi`, or with groups [g][k/g][r][s][c/g] as oneDNN's grouped `gohwi` (dims g, o, i, h, w).
  dnnl::memory::format_tag w_tag;
};

inline DnnlConvShape dnnl_conv_shape(const ConvDesc& d) {
  using tag = dnnl::memory::format_tag;
  DnnlConvShape s;
  s.src = {d.n, d.c, d.h, d.w};
  s.dst = {d.n, d.k, d.p(), d.q()};
  if (d.groups == 1) {
    s.wei = {d.k, d.c, d.r, d.s};
    s.w_tag = tag::ohwi;
  } else {
    s.wei = {d.groups, d.k / d.groups, d.c / d.groups, d.r, d.s};
    s.w_tag = tag::gohwi;
  }
  s.strides = {d.stride_h, d.stride_w};
  s.dilates = {d.dilation_h - 1, d.dilation_w - 1};  // oneDNN counts the skipped rows: 0 is a dense window
  s.pad_l = {d.pad_h, d.pad_w};
  // Padding on the far side so that the output size matches ConvDesc::p()/q() exactly: pad_h + extra_pad_h
  // less the rows that the stride leaves unread.
  s.pad_r = {(d.p() - 1) * d.stride_h + d.dilation_h * (d.r - 1) + 1 - d.h - d.pad_h,
             (d.q() - 1) * d.stride_w + d.dilation_w * (d.s - 1) + 1 - d.w - d.pad_w};
  return s;
}

// KRSC filters flipped in space with in/out channels swapped: the filters of the transposed convolution that
// computes a stride-1 backward-data pass as a forward convolution (fp32, and bf16 as its bits), on `threads`
// (kernels/cpu/dnnl_ops.cpp).
void flip_filters(const ConvDesc& d, const float* w, float* wf, int threads);
void flip_filters(const ConvDesc& d, const uint16_t* w, uint16_t* wf, int threads);

}  // namespace cnn
