// One-input-channel convolutions with at most 8 output channels (LeNet-5's conv1, 1 -> 6 5x5): the vector runs
// over 8 output pixels of a row and the K channels are separate accumulators, so an input vector loaded for a
// tap serves all K channels (K FMAs for one load and K broadcasts, against one load per FMA in the lane-pattern
// kernels of single_channel_conv.cpp), and an 8x8 register transpose turns a block into NHWC. Internal to
// single_channel_conv.cpp, which routes K <= 8 here; callers use single_channel_conv.h.
#pragma once
#include "kernels/backend.h"

namespace cnn {

// K in 1..8, one input channel, NHWC, stride 1, no dilation, symmetric padding (single_channel_conv.h's rules).
bool single_channel_rows_ok(const ConvDesc& d);
void single_channel_rows_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                 float* y);
// dw += dL/dw, db += dL/db (db may be null); sums per chunk of images added in chunk order (same bits for any
// thread count).
void single_channel_rows_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                         float* db);

}  // namespace cnn
