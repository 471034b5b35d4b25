// Winograd F(4x4, 3x3) for C -> C channel convolutions, C 16 to 256, on AVX2 (kernels/cpu/winograd16_conv.h); at
// 16 to 64 channels on CPUs with AVX-512F the tile work is winograd16_avx512.cpp's.
// With g the 3x3 filter of one channel pair, d a 6x6 input tile and e = 6a + b its 36 elements:
// y (4x4) = A^T [(G g G^T) .* (B^T d B)] A, summed over the input channels before the output transform
// (Lavin and Gray's matrices for the points 0, 1, -1, 2, -2).
// The loops over a register block's accumulators carry `#pragma GCC unroll` (see small_channel_conv.cpp).
#include "kernels/cpu/winograd16_conv.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_WINO16_AVX2 1
#endif

namespace cnn {

#ifndef CNN_WINO16_AVX2

bool winograd16_ok(const ConvDesc&) { return false; }
bool winograd_wide_ok(const ConvDesc&) { return false; }
void winograd16_forward(int, const ConvDesc&, const float*, const float*, const float*, float*) {
  raise(kExitFailure, "internal: the Winograd 16-channel kernels need an AVX2/FMA build");
}
void winograd16_backward_data(int, const ConvDesc&, const float*, const float*, float*, bool) {
  raise(kExitFailure, "internal: the Winograd 16-channel kernels need an AVX2/FMA build");
}
void winograd16_backward_filter(int, const ConvDesc&, const float*, const float*, float*) {
  raise(kExitFailure, "internal: the Winograd 16-channel kernels need an AVX2/FMA build");
}

#else

namespace {

constexpr int kE = 36;     // elements of a 6x6 input tile (4x4 outputs)
constexpr int kBlock = 6;  // tiles whose sums stay in registers over the products (12 of 16 vector registers)

// The filter transform G (6x3), also the inverse transform of backward-weights' sums (G^T W G).
constexpr double G[6][3] = {{0.25, 0, 0},
                            {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                            {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                            {1.0 / 24, 1.0 / 12, 1.0 / 6},
                            {1.0 / 24, -1.0 / 12, 1.0 / 6},
                            {0, 0, 1}};

// The call's filters transformed: (G g G^T)[e] for g = filter(co, ci, r, s), in double and rounded once, at
// u[e * C * C + panel_at(ci, co)]; panels of output channels in parallel (256 channels: ~21 MFLOP in double
// per call).
// Each tile element's C x C matrix is stored as C / 16 panels of 16 output channels, [co / 16][ci][co % 16]:
// a product (panel()) reads one panel's 16 KB (256 channels) in order instead of one cache line per C floats,
// lines that at 256 channels fall into 4 of L1's 64 sets and cannot stay there between a block's tiles.
template <int C>
constexpr size_t panel_at(int ci, int co) {
  return (static_cast<size_t>(co / 16) * C + ci) * 16 + co % 16;
}

// The filter transforms (and backward-weights' inverse) take a panel's 16 output channels side by side, which
// the compiler turns into vector arithmetic, and kFilterRows input channels at a time, so that each tile
// element's part of the panel is written (or read) as 512 B in order rather than one line at a time in 36
// streams 4 * C * C bytes apart. One channel pair at a time took 6.1 ms per call at 256 channels, a fifth of a
// 14x14 forward; 2.7 ms now (docs/perf.md, thirteenth pass).
constexpr int kFilterRows = 8;

template <int C, class Filter>
void transform_filters(int threads, Filter filter, float* u) {
  parallel_for(threads, static_cast<size_t>(C) * C * 36, C / 16, [&](long long q) {
    const int cb = static_cast<int>(q) * 16;
    for (int c0 = 0; c0 < C; c0 += kFilterRows) {
      double gg[kFilterRows][6][3][16] = {};  // G g for ci = c0 + i, co = cb + l
      for (int i = 0; i < kFilterRows; ++i) {
        double f[3][3][16];
        for (int r = 0; r < 3; ++r)
          for (int s = 0; s < 3; ++s)
            for (int l = 0; l < 16; ++l) f[r][s][l] = filter(cb + l, c0 + i, r, s);
        for (int a = 0; a < 6; ++a)
          for (int s = 0; s < 3; ++s)
            for (int r = 0; r < 3; ++r)
              for (int l = 0; l < 16; ++l) gg[i][a][s][l] += G[a][r] * f[r][s][l];
      }
      for (int a = 0; a < 6; ++a)
        for (int b = 0; b < 6; ++b) {
          float* out = u + (6 * a + b) * C * C + panel_at<C>(c0, cb);  // kFilterRows rows of the panel
          for (int i = 0; i < kFilterRows; ++i)
            for (int l = 0; l < 16; ++l)
              out[i * 16 + l] =
                  static_cast<float>(G[b][0] * gg[i][a][0][l] + G[b][1] * gg[i][a][1][l] + G[b][2] * gg[i][a][2][l]);
        }
    }
  });
}

struct Geom {
  int n, h, w;
  int th, tw;  // 4x4 output tiles per column and row
  explicit Geom(const ConvDesc& d) : n(d.n), h(d.h), w(d.w), th((d.h + 3) / 4), tw((d.w + 3) / 4) {}
  // Tile t of the call, counted over the images' tiles row by row: its image and (row, column).
  void tile(long long t, int* image, int* i, int* j) const {
    const long long per = static_cast<long long>(th) * tw, in = t % per;
    *image = static_cast<int>(t / per), *i = static_cast<int>(in / tw), *j = static_cast<int>(in % tw);
  }
};

// The 6x6 input pixels of tile (i, j) of one image: rows 4i - 1 .. 4i + 4, columns 4j - 1 .. 4j + 4. Returns a
// pointer to pixel (4i - 1, 4j - 1) in the image with *row_stride = w * C when the tile lies inside it, else
// a copy with zeros outside the image in `edge` (row stride 6 * C).
template <int C>
const float* tile_pixels(const Geom& g, const float* image, int i, int j, float* edge, size_t* row_stride) {
  const int y0 = 4 * i - 1, x0 = 4 * j - 1;
  if (y0 >= 0 && x0 >= 0 && y0 + 5 < g.h && x0 + 5 < g.w) {
    *row_stride = static_cast<size_t>(g.w) * C;
    return image + (static_cast<size_t>(y0) * g.w + x0) * C;
  }
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 6; ++c) {
      float* to = edge + (r * 6 + c) * C;
      const int y = y0 + r, x = x0 + c;
      const bool in = y >= 0 && y < g.h && x >= 0 && x < g.w;
      const float* from = image + (static_cast<size_t>(in ? y : 0) * g.w + (in ? x : 0)) * C;
      for (int ch = 0; ch < C; ch += 8)
        _mm256_storeu_ps(to + ch, in ? _mm256_loadu_ps(from + ch) : _mm256_setzero_ps());
    }
  *row_stride = 6 * C;
  return edge;
}

inline __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
inline __m256 mul(float k, __m256 a) { return _mm256_mul_ps(_mm256_set1_ps(k), a); }
inline __m256 fma(float k, __m256 a, __m256 b) { return _mm256_fmadd_ps(_mm256_set1_ps(k), a, b); }

// B^T applied to six vectors d[0..5] (a column or a row of the tile): B^T's rows (4, 0, -5, 0, 1, 0),
// (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0), (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1).
inline void bt6(const __m256 d[6], __m256 t[6]) {
  const __m256 a = fma(-4.f, d[2], d[4]), b = fma(-4.f, d[1], d[3]);
  const __m256 c = sub(d[4], d[2]), e = mul(2.f, sub(d[3], d[1]));
  t[0] = fma(4.f, d[0], fma(-5.f, d[2], d[4]));
  t[1] = add(a, b);
  t[2] = sub(a, b);
  t[3] = add(c, e);
  t[4] = sub(c, e);
  t[5] = fma(4.f, d[1], fma(-5.f, d[3], d[5]));
}

// A^T applied to six vectors m[0..5]: rows (1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0),
// (0, 1, -1, 8, -8, 1).
inline void at6(const __m256 m[6], __m256 y[4]) {
  const __m256 p = add(m[1], m[2]), q = sub(m[1], m[2]), r = add(m[3], m[4]), s = sub(m[3], m[4]);
  y[0] = add(add(m[0], p), r);
  y[1] = fma(2.f, s, q);
  y[2] = fma(4.f, r, p);
  y[3] = add(fma(8.f, s, q), m[5]);
}

// B^T d B of the tile at `pixels` (tile_pixels), eight channels from ch: v[e * step] for each e.
template <int C>
void input_tile(const float* pixels, size_t row, int ch, float* v, int step) {
  __m256 t[6][6];  // t = B^T d, column by column
  for (int c = 0; c < 6; ++c) {
    __m256 d[6], col[6];
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) d[r] = _mm256_loadu_ps(pixels + r * row + c * C + ch);
    bt6(d, col);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) t[a][c] = col[a];
  }
  for (int a = 0; a < 6; ++a) {  // (B^T d) B, row by row
    __m256 out[6];
    bt6(t[a], out);
#pragma GCC unroll 6
    for (int b = 0; b < 6; ++b) _mm256_storeu_ps(v + (6 * a + b) * step, out[b]);
  }
}

// For one tile element and output channels cb .. cb + 15: m[t][co] = sum over ci of v[t][ci] * u[ci][co] for the
// block's T tiles, the input channels in order (two vectors per tile; u's panel of cb, panel_at).
template <int C, int T>
void panel(const float* u, const float* v, int cb, float* m) {
  __m256 acc[T][2];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const float* up = u + panel_at<C>(0, cb);
#pragma GCC unroll 2
  for (int ci = 0; ci < C; ++ci) {
    const __m256 u0 = _mm256_loadu_ps(up + ci * 16), u1 = _mm256_loadu_ps(up + ci * 16 + 8);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 b = _mm256_broadcast_ss(v + t * C + ci);
      acc[t][0] = _mm256_fmadd_ps(b, u0, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(b, u1, acc[t][1]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm256_storeu_ps(m + t * kE * C + cb, acc[t][0]);
    _mm256_storeu_ps(m + t * kE * C + cb + 8, acc[t][1]);
  }
}

// All C output channels, 16 at a time.
template <int C, int T>
void products(const float* u, const float* v, float* m) {
  for (int cb = 0; cb < C; cb += 16) panel<C, T>(u, v, cb, m);
}

// A^T M A + bias for eight output channels from ch of one tile (m[e * C]), stored where inside the output, or
// added to what is there (`add_to`: backward-data into a residual block's dx).
template <int C>
void output_tile(const Geom& g, const float* m, int ch, const float* bias, bool add_to, float* y, int oy, int ox) {
  __m256 s[4][6];  // A^T M, column by column
  for (int c = 0; c < 6; ++c) {
    __m256 col[6], out[4];
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) col[a] = _mm256_loadu_ps(m + (6 * a + c) * C + ch);
    at6(col, out);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) s[r][c] = out[r];
  }
  const __m256 b = _mm256_loadu_ps(bias + ch);
  for (int r = 0; r < 4 && oy + r < g.h; ++r) {
    __m256 out[4];
    at6(s[r], out);
    float* row = y + (static_cast<size_t>(oy + r) * g.w + ox) * C + ch;
    for (int k = 0; k < 4 && ox + k < g.w; ++k) {
      const __m256 v = add(out[k], b);
      _mm256_storeu_ps(row + k * C, add_to ? add(v, _mm256_loadu_ps(row + k * C)) : v);
    }
  }
}

// One thread's buffers for a call with C channels (grown once per thread).
struct Scratch {
  std::vector<float> v, m, edge;  // [e][tile][ci], [tile][e][co], an edge tile's pixels
  explicit Scratch(int c) : v(kE * kBlock * c), m(kBlock * kE * c), edge(kE * c) {}
};

// Tiles t0 .. t0 + T - 1 of the call (over the images, row by row).
template <int C, int T>
void tile_block(const Geom& g, const float* x, const float* u, const float* bias, bool add, long long t0, Scratch& s,
                float* y) {
  const size_t image = static_cast<size_t>(g.h) * g.w * C;
  for (int t = 0; t < T; ++t) {
    int n, i, j;
    g.tile(t0 + t, &n, &i, &j);
    size_t row;
    const float* pixels = tile_pixels<C>(g, x + n * image, i, j, s.edge.data(), &row);
    for (int ch = 0; ch < C; ch += 8) input_tile<C>(pixels, row, ch, s.v.data() + t * C + ch, kBlock * C);
  }
  for (int e = 0; e < kE; ++e) products<C, T>(u + e * C * C, s.v.data() + e * kBlock * C, s.m.data() + e * C);
  for (int t = 0; t < T; ++t) {
    int n, i, j;
    g.tile(t0 + t, &n, &i, &j);
    for (int ch = 0; ch < C; ch += 8)
      output_tile<C>(g, s.m.data() + t * kE * C, ch, bias, add, y + n * image, 4 * i, 4 * j);
  }
}

using BlockFn = void (*)(const Geom&, const float*, const float*, const float*, bool, long long, Scratch&, float*);
template <int C>
constexpr std::array<BlockFn, kBlock + 1> kBlocks = {nullptr,          tile_block<C, 1>, tile_block<C, 2>,
                                                     tile_block<C, 3>, tile_block<C, 4>, tile_block<C, 5>,
                                                     tile_block<C, 6>};

// y[n, h, w, C] (+)= the convolution of x[n, h, w, C] with the transformed filters u, plus bias: blocks of kBlock
// tiles counted over all the images (small maps fill a block from several images). (256 channels had a second
// driver, which transformed up to 96 tiles before running one panel of U over them all; with U in panels this
// one is 1.3-1.45x faster there, with the same bits: docs/perf.md, twelfth pass.)
template <int C>
void run(int threads, const Geom& g, const float* x, const float* u, const float* bias, bool add, float* y) {
  const long long tiles = static_cast<long long>(g.n) * g.th * g.tw, blocks = (tiles + kBlock - 1) / kBlock;
  const size_t image = static_cast<size_t>(g.h) * g.w * C;
  if (static_cast<size_t>(g.n) * image < min_parallel_elements()) threads = 1;
  threads = static_cast<int>(std::min<long long>(std::max(threads, 1), blocks));
  const bool avx512 = wino16_avx512_takes(C) && avx512_kernels_enabled();  // the same bits (winograd16_avx512.h)
  auto work = [&](int id, int nt) {
    if (avx512)
      return wino16_avx512_tiles(C, g.h, g.w, x, u, bias, add, blocks * id / nt * kBlock,
                                 std::min(tiles, blocks * (id + 1) / nt * kBlock), y);
    static thread_local Scratch s(C);  // one per thread and C
    for (long long b = blocks * id / nt; b < blocks * (id + 1) / nt; ++b) {
      const long long t0 = b * kBlock;
      kBlocks<C>[std::min<long long>(kBlock, tiles - t0)](g, x, u, bias, add, t0, s, y);
    }
  };
  pool_run(threads, work);
}

// --- Backward-weights: dW = G^T [sum over tiles of (B^T d B) .* (A dY A^T)] G, per channel pair ---

// Tiles transformed together for backward-weights: each group reads and writes the C x C sums of all 36 tile
// elements once, which from 32 channels costs more than its tiles' products unless the group is larger (the
// sums are 9.4 MB at 256 channels).
constexpr int group_tiles(int c) { return c == 16 ? 8 : c <= 128 ? 16 : 64; }
constexpr int kMaxGroup = 64;
// Images per partial sum of backward-weights: each chunk zeroes, fills and adds 36 C x C sums (590 KB at 64
// channels), so wider convolutions take more images per chunk. Fixed per C: the same bits for any thread count.
constexpr int chunk_images(int c) { return c == 16 ? 4 : c == 32 ? 8 : 16; }

// A applied to four vectors m[0..3] (A = (A^T)^T, 6x4): (m0, m0 + m1 + m2 + m3, m0 - m1 + m2 - m3,
// m0 + 2 m1 + 4 m2 + 8 m3, m0 - 2 m1 + 4 m2 - 8 m3, m3).
inline void a4(const __m256 m[4], __m256 t[6]) {
  const __m256 p = add(m[0], m[2]), q = add(m[1], m[3]), r = fma(4.f, m[2], m[0]), s = fma(8.f, m[3], mul(2.f, m[1]));
  t[0] = m[0];
  t[1] = add(p, q);
  t[2] = sub(p, q);
  t[3] = add(r, s);
  t[4] = sub(r, s);
  t[5] = m[3];
}

// A dY A^T of the 4x4 gradient tile (i, j), eight channels from ch, zero outside the output: y[e * step].
template <int C>
void gradient_tile(const Geom& g, const float* image, int i, int j, int ch, float* y, int step) {
  __m256 t[6][4];  // A dY, column by column
  for (int c = 0; c < 4; ++c) {
    __m256 m[4], col[6];
    const int x = 4 * j + c;
    for (int r = 0; r < 4; ++r) {
      const int yy = 4 * i + r;
      m[r] = yy < g.h && x < g.w ? _mm256_loadu_ps(image + (static_cast<size_t>(yy) * g.w + x) * C + ch)
                                 : _mm256_setzero_ps();
    }
    a4(m, col);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) t[a][c] = col[a];
  }
  for (int a = 0; a < 6; ++a) {  // (A dY) A^T, row by row
    __m256 out[6];
    a4(t[a], out);
#pragma GCC unroll 6
    for (int b = 0; b < 6; ++b) _mm256_storeu_ps(y + (6 * a + b) * step, out[b]);
  }
}

// w[ci][co] += sum over the T tiles of v[t][ci] * y[t][co] for input channels ci0 .. ci0 + CB - 1 and output
// channels cb .. cb + 15 (one tile element), the tiles in order. w is stored in panels (panel_at): the block is
// CB adjacent lines, and consecutive calls (ci0 ascending) walk the panel in order.
template <int C, int CB>
void accumulate(const float* v, const float* y, int T, int ci0, int cb, float* w) {
  __m256 acc[CB][2];
  float* wp = w + panel_at<C>(ci0, cb);
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) {
    acc[c][0] = _mm256_loadu_ps(wp + c * 16);
    acc[c][1] = _mm256_loadu_ps(wp + c * 16 + 8);
  }
  for (int t = 0; t < T; ++t) {
    const __m256 u0 = _mm256_loadu_ps(y + t * C + cb), u1 = _mm256_loadu_ps(y + t * C + cb + 8);
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      const __m256 b = _mm256_broadcast_ss(v + t * C + ci0 + c);
      acc[c][0] = _mm256_fmadd_ps(b, u0, acc[c][0]);
      acc[c][1] = _mm256_fmadd_ps(b, u1, acc[c][1]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) {
    _mm256_storeu_ps(wp + c * 16, acc[c][0]);
    _mm256_storeu_ps(wp + c * 16 + 8, acc[c][1]);
  }
}
using AccumulateFn = void (*)(const float*, const float*, int, int, int, float*);
template <int C>
constexpr std::array<AccumulateFn, 7> kAccumulate = {nullptr,           accumulate<C, 1>, accumulate<C, 2>,
                                                     accumulate<C, 3>, accumulate<C, 4>, accumulate<C, 5>,
                                                     accumulate<C, 6>};

// The transformed tiles of a group are stored one tile element after another, kGroup * C floats each and a line
// more: the transforms write each tile's 36 elements, which at a stride of a power of two (64 KB at 256 channels,
// 4 KB at 64) would all fall into one L1 set (backward-weights 1.1-1.2x faster with it at 32 and 64 channels,
// within +-10% at 128 and 256; the same bits; docs/perf.md, thirteenth pass).
constexpr int kStepPad = 16;
struct FilterScratch {
  std::vector<float> v, y, edge;  // [e][tile][ci], [e][tile][co], an edge tile's pixels
  explicit FilterScratch(int c)
      : v(kE * (kMaxGroup * c + kStepPad)), y(kE * (kMaxGroup * c + kStepPad)), edge(kE * c) {}
};

// part[e * C * C + panel_at(ci, co)] = the transformed-domain filter gradient of images n0 .. n1 - 1, their tiles
// in order in groups of group_tiles(C) (small maps fill a group from several images).
template <int C>
void filter_chunk(const Geom& g, const float* x, const float* dy, int n0, int n1, FilterScratch& s, float* part) {
  constexpr int kGroup = group_tiles(C), step = kGroup * C + kStepPad;
  const size_t image = static_cast<size_t>(g.h) * g.w * C;
  const long long per = static_cast<long long>(g.th) * g.tw, first = n0 * per, last = n1 * per;
  std::fill(part, part + kE * C * C, 0.f);
  for (long long t0 = first; t0 < last; t0 += kGroup) {
    const int T = static_cast<int>(std::min<long long>(kGroup, last - t0));
    for (int t = 0; t < T; ++t) {
      int n, i, j;
      g.tile(t0 + t, &n, &i, &j);
      size_t row;
      const float* pixels = tile_pixels<C>(g, x + n * image, i, j, s.edge.data(), &row);
      for (int ch = 0; ch < C; ch += 8) {
        input_tile<C>(pixels, row, ch, s.v.data() + t * C + ch, step);
        gradient_tile<C>(g, dy + n * image, i, j, ch, s.y.data() + t * C + ch, step);
      }
    }
    for (int e = 0; e < kE; ++e) {
      float* w = part + e * C * C;
      for (int cb = 0; cb < C; cb += 16)
        for (int ci0 = 0; ci0 < C; ci0 += 6)
          kAccumulate<C>[std::min(6, C - ci0)](s.v.data() + e * step, s.y.data() + e * step, T, ci0, cb, w);
    }
  }
}

template <int C>
void forward_c(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  static thread_local std::vector<float> u;  // the caller's thread
  u.resize(kE * C * C);
  // w is [k][r][s][c]: output channel co, input channel ci.
  transform_filters<C>(
      threads, [w](int co, int ci, int r, int s) { return w[((co * 3 + r) * 3 + s) * C + ci]; }, u.data());
  float bias[C] = {};
  if (b) std::copy(b, b + C, bias);
  run<C>(threads, Geom(d), x, u.data(), bias, false, y);
}

template <int C>
void backward_data_c(int threads, const ConvDesc& d, const float* dy, const float* w, bool add, float* dx) {
  static thread_local std::vector<float> u;
  u.resize(kE * C * C);
  // dx is the forward convolution of dy with f(co, ci, r, s) = w[ci][2 - r][2 - s][co]: dy's channels (the
  // forward's outputs) in, the forward's inputs out, the taps mirrored.
  transform_filters<C>(
      threads, [w](int co, int ci, int r, int s) { return w[((ci * 3 + 2 - r) * 3 + 2 - s) * C + co]; }, u.data());
  const float bias[C] = {};
  run<C>(threads, Geom(d), dy, u.data(), bias, add, dx);
}

template <int C>
void backward_filter_c(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw) {
  const Geom g(d);
  constexpr int kChunk = chunk_images(C);
  const int chunks = (d.n + kChunk - 1) / kChunk;
  constexpr size_t kPart = static_cast<size_t>(kE) * C * C;
  static thread_local std::vector<float> parts_buf;  // the caller's thread
  parts_buf.resize(static_cast<size_t>(chunks) * kPart);
  float* const parts = parts_buf.data();  // workers reach it through this pointer, not their own thread_local
  const size_t work = static_cast<size_t>(d.n) * d.h * d.w * C;
  const bool avx512 = wino16_avx512_takes(C) && avx512_kernels_enabled();
  parallel_for(threads, work, chunks, [&](long long q) {
    const int n0 = static_cast<int>(q) * kChunk, n1 = std::min(d.n, n0 + kChunk);
    if (avx512) return wino16_avx512_filter_chunk(C, d.h, d.w, x, dy, n0, n1, parts + q * kPart);
    static thread_local FilterScratch s(C);  // one per thread and C
    filter_chunk<C>(g, x, dy, n0, n1, s, parts + q * kPart);
  });
  // The chunks' sums in chunk order (the same bits for any thread count), then G^T W G into dw[co][r][s][ci], one
  // task per kFilterRows input channels of a panel of 16 output channels: each task adds up the chunks' sums it
  // transforms (a separate pass over all of them wrote the total back for the transform to read it again) and
  // takes the 16 output channels side by side in both products (one channel at a time, the second product's
  // chains of six dependent adds compiled to shuffles). Both took 0.5 of a 1.7 ms call at 64 channels on 8x8 maps
  // (docs/perf.md, eighteenth pass).
  constexpr int kRowBlocks = C / kFilterRows;
  constexpr int kW = kFilterRows * 16;  // one tile element's sums of a task, contiguous in a panel
  parallel_for(threads, static_cast<size_t>(chunks) * kPart, (C / 16) * kRowBlocks, [&](long long task) {
    const int cb = static_cast<int>(task / kRowBlocks) * 16, c0 = static_cast<int>(task % kRowBlocks) * kFilterRows;
    float wsum[kE][kW];
    for (int e = 0; e < kE; ++e) {
      const float* in = parts + e * C * C + panel_at<C>(c0, cb);
      for (int k = 0; k < kW; ++k) wsum[e][k] = in[k];
      for (int q = 1; q < chunks; ++q) {
        const float* more = in + static_cast<size_t>(q) * kPart;
        for (int k = 0; k < kW; ++k) wsum[e][k] += more[k];
      }
    }
    double t[kFilterRows][6][3][16] = {};  // W G for ci = c0 + i, co = cb + l
    for (int a = 0; a < 6; ++a)
      for (int b = 0; b < 6; ++b)
        for (int i = 0; i < kFilterRows; ++i)
          for (int s = 0; s < 3; ++s)
            for (int l = 0; l < 16; ++l) t[i][a][s][l] += wsum[6 * a + b][i * 16 + l] * G[b][s];
    float res[3][3][kFilterRows][16];
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s)
        for (int i = 0; i < kFilterRows; ++i) {
          double v[16] = {};
          for (int a = 0; a < 6; ++a)
            for (int l = 0; l < 16; ++l) v[l] += G[a][r] * t[i][a][s][l];
          for (int l = 0; l < 16; ++l) res[r][s][i][l] = static_cast<float>(v[l]);
        }
    for (int l = 0; l < 16; ++l)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) {
          float* out = dw + (((cb + l) * 3 + r) * 3 + s) * C + c0;
          for (int i = 0; i < kFilterRows; ++i) out[i] += res[r][s][i][l];
        }
  });
}

// 3x3 "same" convolutions with C -> C channels, NHWC (for C = 16 nChw16c is the same memory).
bool same3x3(const ConvDesc& d, int c) {
  const bool nhwc = d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC;
  return d.c == c && d.k == c && d.r == 3 && d.s == 3 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 1 &&
         d.pad_w == 1 && d.plain() && nhwc && d.n >= 1 && d.h >= 1 && d.w >= 1;
}

}  // namespace

bool winograd16_ok(const ConvDesc& d) { return same3x3(d, 16); }
bool winograd_wide_ok(const ConvDesc& d) {
  return same3x3(d, 32) || same3x3(d, 64) || same3x3(d, 128) || same3x3(d, 256);
}

void winograd16_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  switch (d.c) {
    case 16: return forward_c<16>(threads, d, x, w, b, y);
    case 32: return forward_c<32>(threads, d, x, w, b, y);
    case 64: return forward_c<64>(threads, d, x, w, b, y);
    case 128: return forward_c<128>(threads, d, x, w, b, y);
    default: return forward_c<256>(threads, d, x, w, b, y);
  }
}

void winograd16_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx, bool add) {
  switch (d.c) {
    case 16: return backward_data_c<16>(threads, d, dy, w, add, dx);
    case 32: return backward_data_c<32>(threads, d, dy, w, add, dx);
    case 64: return backward_data_c<64>(threads, d, dy, w, add, dx);
    case 128: return backward_data_c<128>(threads, d, dy, w, add, dx);
    default: return backward_data_c<256>(threads, d, dy, w, add, dx);
  }
}

void winograd16_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw) {
  switch (d.c) {
    case 16: return backward_filter_c<16>(threads, d, x, dy, dw);
    case 32: return backward_filter_c<32>(threads, d, x, dy, dw);
    case 64: return backward_filter_c<64>(threads, d, x, dy, dw);
    case 128: return backward_filter_c<128>(threads, d, x, dy, dw);
    default: return backward_filter_c<256>(threads, d, x, dy, dw);
  }
}

#endif

}  // namespace cnn
