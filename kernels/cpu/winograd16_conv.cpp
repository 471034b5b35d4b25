// Winograd F(2x2, 3x3) for 16 -> 16 channel convolutions on AVX2 (kernels/cpu/winograd16_conv.h).
// With g the 3x3 filter of one channel pair, d a 4x4 input tile and e = 4a + b its 16 elements:
// y (2x2) = A^T [(G g G^T) .* (B^T d B)] A, summed over the input channels before the output transform.
// The loops over a register block's accumulators carry `#pragma GCC unroll` (see small_channel_conv.cpp).
#include "kernels/cpu/winograd16_conv.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_WINO16_AVX2 1
#endif

namespace cnn {

#ifndef CNN_WINO16_AVX2

bool winograd16_ok(const ConvDesc&) { return false; }
void winograd16_forward(int, const ConvDesc&, const float*, const float*, const float*, float*) {
  raise(kExitFailure, "internal: the Winograd 16-channel kernels need an AVX2/FMA build");
}
void winograd16_backward_data(int, const ConvDesc&, const float*, const float*, float*) {
  raise(kExitFailure, "internal: the Winograd 16-channel kernels need an AVX2/FMA build");
}

#else

namespace {

constexpr int kC = 16;     // channels, in and out
constexpr int kBlock = 6;  // tiles whose sums stay in registers over the products (12 of 16 vector registers)

// The call's filters transformed: u[(e * 16 + ci) * 16 + co] = (G g G^T)[e] for g = filter(co, ci, r, s).
template <class Filter>
void transform_filters(Filter filter, float* u) {
  for (int co = 0; co < kC; ++co)
    for (int ci = 0; ci < kC; ++ci) {
      float t[4][3];
      for (int s = 0; s < 3; ++s) {  // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2
        const float g0 = filter(co, ci, 0, s), g1 = filter(co, ci, 1, s), g2 = filter(co, ci, 2, s);
        t[0][s] = g0;
        t[1][s] = 0.5f * (g0 + g1 + g2);
        t[2][s] = 0.5f * (g0 - g1 + g2);
        t[3][s] = g2;
      }
      for (int a = 0; a < 4; ++a) {  // (G g) G^T, the same on each row
        const float row[4] = {t[a][0], 0.5f * (t[a][0] + t[a][1] + t[a][2]), 0.5f * (t[a][0] - t[a][1] + t[a][2]),
                              t[a][2]};
        for (int b = 0; b < 4; ++b) u[((4 * a + b) * kC + ci) * kC + co] = row[b];
      }
    }
}

struct Geom {
  int n, h, w;
  int th, tw;  // 2x2 output tiles per column and row
  explicit Geom(const ConvDesc& d) : n(d.n), h(d.h), w(d.w), th((d.h + 1) / 2), tw((d.w + 1) / 2) {}
};

// The 4x4 input pixels of tile (i, j) of one image: rows 2i - 1 .. 2i + 2, columns 2j - 1 .. 2j + 2. Returns a
// pointer to pixel (2i - 1, 2j - 1) in the image with *row_stride = w * 16 when the tile lies inside it, else
// a copy with zeros outside the image in `edge` (row stride 4 * 16).
inline const float* tile_pixels(const Geom& g, const float* image, int i, int j, float* edge, size_t* row_stride) {
  const int y0 = 2 * i - 1, x0 = 2 * j - 1;
  if (y0 >= 0 && x0 >= 0 && y0 + 3 < g.h && x0 + 3 < g.w) {
    *row_stride = static_cast<size_t>(g.w) * kC;
    return image + (static_cast<size_t>(y0) * g.w + x0) * kC;
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      float* to = edge + (r * 4 + c) * kC;
      const int y = y0 + r, x = x0 + c;
      const bool in = y >= 0 && y < g.h && x >= 0 && x < g.w;
      const float* from = image + (static_cast<size_t>(in ? y : 0) * g.w + (in ? x : 0)) * kC;
      _mm256_storeu_ps(to, in ? _mm256_loadu_ps(from) : _mm256_setzero_ps());
      _mm256_storeu_ps(to + 8, in ? _mm256_loadu_ps(from + 8) : _mm256_setzero_ps());
    }
  *row_stride = 4 * kC;
  return edge;
}

inline __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }

// B^T d B of the tile at `pixels` (tile_pixels), eight channels from ch: v[e * kBlock * 16] for each e.
inline void input_tile(const float* pixels, size_t row, int ch, float* v) {
  __m256 t[4][4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const float* p = pixels + c * kC + ch;
    const __m256 d0 = _mm256_loadu_ps(p), d1 = _mm256_loadu_ps(p + row), d2 = _mm256_loadu_ps(p + 2 * row),
                 d3 = _mm256_loadu_ps(p + 3 * row);
    t[0][c] = sub(d0, d2);
    t[1][c] = add(d1, d2);
    t[2][c] = sub(d2, d1);
    t[3][c] = sub(d1, d3);
  }
  constexpr int step = kBlock * kC;
#pragma GCC unroll 4
  for (int a = 0; a < 4; ++a) {
    _mm256_storeu_ps(v + (4 * a + 0) * step, sub(t[a][0], t[a][2]));
    _mm256_storeu_ps(v + (4 * a + 1) * step, add(t[a][1], t[a][2]));
    _mm256_storeu_ps(v + (4 * a + 2) * step, sub(t[a][2], t[a][1]));
    _mm256_storeu_ps(v + (4 * a + 3) * step, sub(t[a][1], t[a][3]));
  }
}

// For one tile element: m[t][co] = sum over ci of v[t][ci] * u[ci][co] for the block's T tiles, the input
// channels in order.
template <int T>
void products(const float* u, const float* v, float* m) {
  __m256 acc[T][2];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int ci = 0; ci < kC; ++ci) {
    const __m256 u0 = _mm256_loadu_ps(u + ci * kC), u1 = _mm256_loadu_ps(u + ci * kC + 8);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 b = _mm256_broadcast_ss(v + t * kC + ci);
      acc[t][0] = _mm256_fmadd_ps(b, u0, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(b, u1, acc[t][1]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm256_storeu_ps(m + t * 16 * kC, acc[t][0]);
    _mm256_storeu_ps(m + t * 16 * kC + 8, acc[t][1]);
  }
}

// A^T M A + bias for eight output channels from ch of one tile (m[e * 16]), stored where inside the output.
inline void output_tile(const Geom& g, const float* m, int ch, const float* bias, float* y, int oy, int ox) {
  __m256 s[2][4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256 m0 = _mm256_loadu_ps(m + (0 + c) * kC + ch), m1 = _mm256_loadu_ps(m + (4 + c) * kC + ch),
                 m2 = _mm256_loadu_ps(m + (8 + c) * kC + ch), m3 = _mm256_loadu_ps(m + (12 + c) * kC + ch);
    s[0][c] = add(add(m0, m1), m2);
    s[1][c] = sub(sub(m1, m2), m3);
  }
  const __m256 b = _mm256_loadu_ps(bias + ch);
  for (int r = 0; r < 2 && oy + r < g.h; ++r) {
    float* row = y + (static_cast<size_t>(oy + r) * g.w + ox) * kC + ch;
    _mm256_storeu_ps(row, add(add(add(s[r][0], s[r][1]), s[r][2]), b));
    if (ox + 1 < g.w) _mm256_storeu_ps(row + kC, add(sub(sub(s[r][1], s[r][2]), s[r][3]), b));
  }
}

struct Scratch {
  alignas(32) float v[16 * kBlock * kC];  // [e][tile][ci]
  alignas(32) float m[kBlock * 16 * kC];  // [tile][e][co]
  alignas(32) float edge[16 * kC];        // an edge tile's pixels
};

// Tiles j0 .. j0 + T - 1 of tile row i of one image.
template <int T>
void tile_block(const Geom& g, const float* x, const float* u, const float* bias, int i, int j0, Scratch& s,
                float* y) {
  for (int t = 0; t < T; ++t) {
    size_t row;
    const float* pixels = tile_pixels(g, x, i, j0 + t, s.edge, &row);
    for (int ch = 0; ch < kC; ch += 8) input_tile(pixels, row, ch, s.v + t * kC + ch);
  }
  for (int e = 0; e < 16; ++e) products<T>(u + e * kC * kC, s.v + e * kBlock * kC, s.m + e * kC);
  for (int t = 0; t < T; ++t)
    for (int ch = 0; ch < kC; ch += 8) output_tile(g, s.m + t * 16 * kC, ch, bias, y, 2 * i, 2 * (j0 + t));
}

using BlockFn = void (*)(const Geom&, const float*, const float*, const float*, int, int, Scratch&, float*);
constexpr BlockFn kBlocks[kBlock + 1] = {nullptr,        tile_block<1>, tile_block<2>, tile_block<3>,
                                         tile_block<4>, tile_block<5>, tile_block<6>};

// y[n, h, w, 16] = the convolution of x[n, h, w, 16] with the transformed filters u, plus bias.
void run(int threads, const Geom& g, const float* x, const float* u, const float* bias, float* y) {
  const long long items = static_cast<long long>(g.n) * g.th;  // (image, tile row)
  const size_t image = static_cast<size_t>(g.h) * g.w * kC;
  if (static_cast<size_t>(g.n) * image < min_parallel_elements()) threads = 1;
  threads = static_cast<int>(std::min<long long>(std::max(threads, 1), items));
  auto work = [&](int id, int nt) {
    Scratch s;
    for (long long it = items * id / nt; it < items * (id + 1) / nt; ++it) {
      const int n = static_cast<int>(it / g.th), i = static_cast<int>(it % g.th);
      for (int j0 = 0; j0 < g.tw; j0 += kBlock)
        kBlocks[std::min(kBlock, g.tw - j0)](g, x + n * image, u, bias, i, j0, s, y + n * image);
    }
  };
  if (threads == 1) return work(0, 1);
#pragma omp parallel num_threads(threads)
  work(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace

bool winograd16_ok(const ConvDesc& d) {
  return d.c == kC && d.k == kC && d.r == 3 && d.s == 3 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 1 &&
         d.pad_w == 1 && d.plain() && d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC &&
         d.n >= 1 && d.h >= 1 && d.w >= 1;
}

void winograd16_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  static thread_local std::vector<float> u;  // the caller's thread
  u.resize(16 * kC * kC);
  // w is [k][r][s][c]: output channel co, input channel ci.
  transform_filters([w](int co, int ci, int r, int s) { return w[((co * 3 + r) * 3 + s) * kC + ci]; }, u.data());
  float bias[kC] = {};
  if (b) std::copy(b, b + kC, bias);
  run(threads, Geom(d), x, u.data(), bias, y);
}

void winograd16_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx) {
  static thread_local std::vector<float> u;
  u.resize(16 * kC * kC);
  // dx is the forward convolution of dy with f(co, ci, r, s) = w[ci][2 - r][2 - s][co]: dy's channels (the
  // forward's outputs) in, the forward's inputs out, the taps mirrored.
  transform_filters([w](int co, int ci, int r, int s) { return w[((ci * 3 + 2 - r) * 3 + 2 - s) * kC + co]; },
                    u.data());
  const float bias[kC] = {};
  run(threads, Geom(d), dy, u.data(), bias, dx);
}

#endif

}  // namespace cnn
