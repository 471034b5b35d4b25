// 3x3 "same" convolutions with 16 input and 16 output channels (also 32 to 256, below) on Winograd
// F(4x4, 3x3), which the fast CPU backend runs instead of oneDNN's direct kernels: ResNet-20's first stage (6 such
// convolutions, 51 of a ~130 ms step at 90% of the FMA peak on oneDNN's brgconv; oneDNN's own Winograd is slower
// there, docs/perf.md).
// A 4x4 output tile needs 36 products per (input, output) channel pair instead of 144, at the cost of the tile
// transforms; with 16 channels a pixel is two AVX2 vectors, so the transforms are vector additions and FMAs by
// constants, and the products are a 16 x 16 matrix-vector product per tile element, with six tiles' sums held
// in registers. On CPUs with AVX-512F the 16-channel tile work runs on 512-bit registers instead, with the same
// bits (winograd16_avx512.h). Backward-data is the forward convolution of dy with the filters flipped in space and their
// channels swapped; backward-weights sums, per tile element, the products of the transformed input and
// gradient tiles over the tiles and transforms the 6x6 sums back to 3x3 filters.
//
// Rounding differs from a direct convolution's (the transforms scale inputs by up to 8 and cancel): differences
// of a few 1e-6 of the sums' magnitude, as with oneDNN's F(4x4, 3x3) kernels on the later stages. Every output
// pixel (forward, backward-data) is computed on its own in a fixed order, the filter gradient's sums are added
// in a fixed order: the same bits for any thread count.
#pragma once
#include "kernels/backend.h"

namespace cnn {

// Whether the calls below take `d`: 16 -> 16 channels, 3x3, stride 1, padding 1, groups 1, no dilation, NHWC,
// and an AVX2/FMA build.
bool winograd16_ok(const ConvDesc& d);
// The same for 32 -> 32, 64 -> 64, 128 -> 128 and 256 -> 256 channels (ResNet-20's second and third stages,
// ResNet-50's first three). The products are 16 output channels at a time over all input channels, and a block
// of tiles may span several images (an 8x8 map has 4); at 256 channels, blocks of up to 96 tiles run one
// 16-channel panel of the transformed filters at a time. Not 512 (7x7 maps, where these tiles waste a quarter of
// their outputs): oneDNN's direct kernels are faster there.
// DnnlOps uses them where oneDNN has no Winograd kernel of its own (below AVX-512: docs/perf.md) and, at 32 and
// 64 channels, where their AVX-512 code runs (winograd16_avx512.h).
bool winograd_wide_ok(const ConvDesc& d);

// y = conv(x, w) + b (b may be null).
void winograd16_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y);
// dx = dL/dx (overwritten), or dx += dL/dx with `add` (a residual block's dx: the same bits as computing it and
// adding it afterwards).
void winograd16_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx,
                              bool add = false);
// dw += dL/dw (no bias): the transformed-domain sums are kept per chunk of images (4 at 16 channels, 8 at 32,
// 16 above) and added in chunk order, so the result has the same bits for any thread count.
void winograd16_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw);

}  // namespace cnn
