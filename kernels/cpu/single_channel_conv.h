// Direct fp32 convolutions for layers with one input channel (the first layer of a grey-image network), which the
// fast CPU backend runs instead of oneDNN's: oneDNN blocks channels by 16, so on one input channel 15 of 16 lanes
// idle (LeNet-5's conv1, 1 -> 6 5x5: forward 2.2 ms and backward-weights 2.0 ms per step at 25-30 GFLOP/s,
// docs/perf.md). Two kernel families, by output channels:
// - K <= 8 (kernels/cpu/single_channel_rows.h): the vector runs over 8 output pixels of a row, one accumulator
//   per channel, so one input load feeds K FMAs; an 8x8 register transpose writes NHWC.
// - K > 8 (here): the vector runs along the output row with pixels and output channels interleaved as NHWC
//   stores them (lane q*K + k), against a copy of the padded input row with each pixel repeated K times: every
//   lane does useful work for any K, the filter taps are K-lane patterns kept in registers, and the results are
//   NHWC without a transpose (one load per FMA).
#pragma once
#include "kernels/backend.h"

namespace cnn {

// Whether the calls below take `d`: one input channel, NHWC, groups 1, stride 1, no dilation, symmetric padding,
// an AVX2/FMA build, and K <= 8 or K / gcd(K, 8) <= 4 (the lane patterns one register block holds); for K > 8
// backward-weights also needs S * K / gcd(K, 8) <= 15 and S <= 7 (its accumulators stay in registers).
bool single_channel_forward_ok(const ConvDesc& d);
bool single_channel_filter_ok(const ConvDesc& d);

// y = conv(x, w) + b (b may be null); x [n,h,w,1], w [k,r,s,1], y [n,p,q,k].
void single_channel_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                 float* y);
// dw += dL/dw, db += dL/db (db may be null). Sums are kept per chunk of images and added in chunk order, so the
// result has the same bits for any thread count.
void single_channel_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                         float* db);

}  // namespace cnn
