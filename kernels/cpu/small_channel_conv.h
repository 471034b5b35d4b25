// fp32 convolutions with few input channels and a few multiples of 8 output channels, which the fast CPU
// backend runs instead of oneDNN's: oneDNN blocks channels by 16, so with 6 input channels its backward-data
// writes 6 of 16 lanes, and its backward-weights kernel partitions such small problems so badly that it runs on
// one thread (LeNet-5's conv2, 6 -> 16 5x5: 2.8 and 1.2 ms per step at one thread, 43 and 100 GFLOP/s,
// docs/perf.md). Here the vector runs over the output channels: the forward pass keeps a block of output
// pixels' sums in registers over the taps; backward-weights a block of (input channel, output channel) sums
// of one tap over an image's pixels; backward-data sums one input pixel's taps over the output channels and
// reduces across the lanes once per pixel.
#pragma once
#include "kernels/backend.h"

namespace cnn {

// Whether the calls below take `d`: 2 to 8 input channels, 8, 16, 24 or 32 output channels, NHWC, groups 1,
// stride 1, no dilation, symmetric padding, and an AVX2/FMA build (one input channel: single_channel_conv.h).
bool small_channel_ok(const ConvDesc& d);

// y = conv(x, w) + b (b may be null): per output pixel, a block of pixels' K-vectors over the taps and channels.
void small_channel_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                float* y);
// dw += dL/dw, db += dL/db (db may be null). Sums are kept per chunk of images and added in chunk order, so the
// result has the same bits for any thread count.
void small_channel_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                        float* db);
// dx = dL/dx (overwritten); each input pixel is summed on its own, in a fixed order.
void small_channel_conv_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx);

}  // namespace cnn
