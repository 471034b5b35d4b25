// AVX-512 versions of the Winograd F(4x4, 3x3) kernels' tile work (kernels/cpu/winograd16_conv.h) for 16, 32 and
// 64 channels: 16 channels of a pixel are one 512-bit register instead of two 256-bit ones, which halves the instructions of
// the tile transforms (most of these kernels' time, docs/perf.md) as well as of the products, and the masked
// loads read a border tile's pixels in place instead of copying it with zeros first. Each lane does the same
// operations in the same order as the AVX2 code, so the results have the same bits (tests/unit/
// test_winograd16_avx512.cpp); winograd16_conv.cpp keeps the filter transforms, the work split over threads
// and the sums over chunks, and calls these on CPUs with AVX-512F (the code is compiled for it with target
// attributes, so the rest of the program stays x86-64-v3).
#pragma once

namespace cnn {

// Whether cnntrain's AVX-512 kernels run: the CPU and the OS support AVX-512F and CNNTRAIN_AVX512_KERNELS is not 0
// (docs/environment.md; read at each call). winograd16_conv.cpp calls the functions below then, and
// small_channel_conv.cpp its AVX-512 code.
bool avx512_kernels_enabled();
// The channel counts they take: 16, 32 and 64 (C -> C).
bool wino16_avx512_takes(int c);

// Tiles t0 .. t1 - 1 (counted over the images' 4x4 output tiles, row by row) of the convolution of x[n, h, w, c]
// with the transformed filters u[36][c x c in winograd16_conv.cpp's panels of 16 output channels], plus bias[c],
// into y[n, h, w, c] (added to it with `add`).
void wino16_avx512_tiles(int c, int h, int w, const float* x, const float* u, const float* bias, bool add, long long t0,
                         long long t1, float* y);

// part[e][c x c in panels] = the transformed-domain filter gradient (sum over the tiles of images n0 .. n1 - 1, in
// order, of (B^T x B)[e][ci] * (A dY A^T)[e][co]); overwritten.
void wino16_avx512_filter_chunk(int c, int h, int w, const float* x, const float* dy, int n0, int n1, float* part);

}  // namespace cnn
