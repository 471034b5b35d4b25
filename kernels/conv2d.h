// 2-D convolution (cross-correlation) with stride, zero padding (extra_pad_h/w more after the input), dilation,
// groups and optional bias (ConvDesc, kernels/backend.h).
// x: [N,H,W,C] NHWC, w: [K,R,S,C/groups] KRSC, b: [K], y: [N,P,Q,K]; P = ConvDesc::p(), Q = ConvDesc::q().
#pragma once
#include "kernels/backend.h"

namespace cnn {

// Reference kernels: plain loops, deterministic, the ground truth every other implementation is tested against.
void conv2d_forward_cpu(const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
void conv2d_backward_data_cpu(const ConvDesc& d, const float* dy, const float* w, float* dx);
// dw += dL/dw; db += dL/db (db may be null).
void conv2d_backward_filter_cpu(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db);

}  // namespace cnn
