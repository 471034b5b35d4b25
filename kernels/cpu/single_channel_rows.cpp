// One-input-channel convolutions with K <= 8 output channels on AVX2 (kernels/cpu/single_channel_rows.h).
// The loops over a register block's accumulators carry `#pragma GCC unroll` (left to -O3's late unrolling, g++
// keeps such __m256 arrays in memory), and every loop that indexes the accumulators has compile-time bounds.
#include "kernels/cpu/single_channel_rows.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_SINGLE_ROWS_AVX2 1
#endif

namespace cnn {

#ifndef CNN_SINGLE_ROWS_AVX2

bool single_channel_rows_ok(const ConvDesc&) { return false; }
void single_channel_rows_forward(int, const ConvDesc&, const float*, const float*, const float*, float*) {
  raise(kExitFailure, "internal: single-channel convolution kernels need an AVX2/FMA build");
}
void single_channel_rows_backward_filter(int, const ConvDesc&, const float*, const float*, float*, float*) {
  raise(kExitFailure, "internal: single-channel convolution kernels need an AVX2/FMA build");
}

#else

namespace {

constexpr int kMaxK = 8;
constexpr int kChunk = 4;  // images per partial sum of backward-weights
// Register blocks within the 16 ymm registers: the forward keeps K*V accumulators, V input vectors and one
// broadcast; backward-weights K*SB accumulators, SB input vectors and one dy vector.
constexpr int forward_vectors(int k) { return std::min(4, 14 / (k + 1)); }
constexpr int filter_taps(int k) { return 15 / (k + 1); }

// Rows of Ws floats (a multiple of 8, at least the padded width and the nv output vectors of a row) in both the
// zero-padded image and the transposed dy, so output vector m of row p starts at p*Ws + 8m in each and tap
// (r, s) reads the padded image at r*Ws + s further. Lanes of pixels q >= Q are computed and dropped (forward)
// or carry dy = 0 (backward-weights; their inputs are finite padded-image or slack values, except that a NaN or
// Inf input pixel, which already makes the step non-finite, can reach taps the reference would not pair it with).
struct Geo {
  int K, R, S, P, Q, nv, Ws, Hp;
  explicit Geo(const ConvDesc& d)
      : K(d.k), R(d.r), S(d.s), P(d.p()), Q(d.q()), nv((d.q() + 7) / 8),
        Ws(std::max(nv * 8, (d.w + 2 * d.pad_w + 7) / 8 * 8)), Hp(d.h + 2 * d.pad_h) {}
  // The padded image and the slack the last rows' vectors read past it (at most S + 7 floats).
  size_t padded_len() const { return static_cast<size_t>(Hp) * Ws + S + 16; }
  size_t plane() const { return static_cast<size_t>(P) * Ws; }  // one channel of the transposed dy
};

// The image zero-padded into this thread's scratch (zeroed per image: shapes change between calls).
const float* padded_image(const ConvDesc& d, const Geo& g, const float* x) {
  static thread_local std::vector<float> buf;
  buf.assign(g.padded_len(), 0.f);
  for (int h = 0; h < d.h; ++h)
    std::memcpy(buf.data() + static_cast<size_t>(h + d.pad_h) * g.Ws + d.pad_w, x + static_cast<size_t>(h) * d.w,
                sizeof(float) * d.w);
  return buf.data();
}

void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The first K lanes.
__m256i lanes_mask(int k) {
  alignas(32) int m[8];
  for (int l = 0; l < 8; ++l) m[l] = l < k ? -1 : 0;
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
}

// Output vectors v0..v0+V-1 of row p into yrow (row p of y, NHWC): K*V sums over the taps, bias first, the
// taps' weights broadcast from wb [R][S][K]; then per vector an 8x8 transpose to pixel-major and one store per
// pixel. A pixel's 8-lane store also writes the next pixels' first 8 - K floats, which their own stores (later,
// in order) overwrite; so only a store that would pass the row's end writes its K floats alone.
template <int K, int V>
void forward_block(const Geo& g, const float* xp, const float* wb, const float* bias, int p, int v0,
                   float* yrow) {
  __m256 acc[K][V];
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k)
#pragma GCC unroll 8
    for (int i = 0; i < V; ++i) acc[k][i] = _mm256_broadcast_ss(bias + k);
  for (int r = 0; r < g.R; ++r) {
    const float* xr = xp + static_cast<size_t>(p + r) * g.Ws + 8 * v0;
    const float* wr = wb + static_cast<size_t>(r) * g.S * K;
#pragma GCC unroll 1
    for (int s = 0; s < g.S; ++s) {
      __m256 xv[V];
#pragma GCC unroll 8
      for (int i = 0; i < V; ++i) xv[i] = _mm256_loadu_ps(xr + s + 8 * i);
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) {
        const __m256 wk = _mm256_broadcast_ss(wr + s * K + k);
#pragma GCC unroll 8
        for (int i = 0; i < V; ++i) acc[k][i] = _mm256_fmadd_ps(wk, xv[i], acc[k][i]);
      }
    }
  }
  const int row_end = g.Q * K;
#pragma GCC unroll 8
  for (int i = 0; i < V; ++i) {
    __m256 t[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) t[k] = k < K ? acc[k][i] : _mm256_setzero_ps();
    transpose8(t);
    const int q0 = 8 * (v0 + i), n = std::min(8, g.Q - q0);
    float* out = yrow + static_cast<size_t>(q0) * K;
    if (n == 8 && (q0 + 7) * K + 8 <= row_end) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + j * K, t[j]);
      continue;
    }
    for (int j = 0; j < n; ++j) {
      if ((q0 + j) * K + 8 <= row_end) {
        _mm256_storeu_ps(out + j * K, t[j]);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, t[j]);
        std::memcpy(out + j * K, lanes, sizeof(float) * K);
      }
    }
  }
}

// dyT [K][P][Ws] <- one image's dy [P][Q][K]: eight pixels' K channels per 8x8 transpose, zeros for q >= Q.
template <int K>
void transpose_dy(const Geo& g, const float* dy, float* dyT) {
  const __m256i mask = lanes_mask(K);
  const size_t plane = g.plane(), image = static_cast<size_t>(g.P) * g.Q * K;
  for (int p = 0; p < g.P; ++p)
    for (int v = 0; v < g.Ws / 8; ++v) {
      __m256 t[8];
      const size_t at = (static_cast<size_t>(p) * g.Q + 8 * v) * K;
      if (8 * v + 8 <= g.Q && at + 7 * K + 8 <= image) {  // eight whole 8-float loads inside the image
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) t[j] = _mm256_loadu_ps(dy + at + j * K);
      } else {
        for (int j = 0; j < 8; ++j) {
          const size_t pj = at + static_cast<size_t>(j) * K;
          t[j] = 8 * v + j >= g.Q  ? _mm256_setzero_ps()
                 : pj + 8 <= image ? _mm256_loadu_ps(dy + pj)
                                   : _mm256_maskload_ps(dy + pj, mask);
        }
      }
      transpose8(t);
#pragma GCC unroll 8
      for (int k = 0; k < K; ++k) _mm256_storeu_ps(dyT + k * plane + static_cast<size_t>(p) * g.Ws + 8 * v, t[k]);
    }
}

// part [R][S][K][8] += one image's sums for taps (r, s0..s0+SB-1): K*SB accumulators over every vector of the
// image's rows, one dy load per channel and one input load per tap.
template <int K, int SB>
void filter_pass(const Geo& g, const float* xp, const float* dyT, int r, int s0, float* part) {
  float* pp = part + (static_cast<size_t>(r) * g.S + s0) * K * 8;
  __m256 acc[SB][K];
#pragma GCC unroll 8
  for (int j = 0; j < SB; ++j)
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc[j][k] = _mm256_loadu_ps(pp + (j * K + k) * 8);
  const size_t plane = g.plane();
  const float* xr = xp + static_cast<size_t>(r) * g.Ws + s0;
  const long long vectors = static_cast<long long>(g.P) * g.Ws / 8;
  for (long long m = 0; m < vectors; ++m) {
    __m256 xv[SB];
#pragma GCC unroll 8
    for (int j = 0; j < SB; ++j) xv[j] = _mm256_loadu_ps(xr + 8 * m + j);
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) {
      __m256 dv = _mm256_loadu_ps(dyT + k * plane + 8 * m);
      asm("" : "+x"(dv));  // one load per vector: keeps g++ from folding it into each of the SB FMAs
#pragma GCC unroll 8
      for (int j = 0; j < SB; ++j) acc[j][k] = _mm256_fmadd_ps(dv, xv[j], acc[j][k]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < SB; ++j)
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) _mm256_storeu_ps(pp + (j * K + k) * 8, acc[j][k]);
}

// The instantiations, picked at run time: [K - 1][block - 1], null past a K's register budget.
using ForwardFn = void (*)(const Geo&, const float*, const float*, const float*, int, int, float*);
using FilterFn = void (*)(const Geo&, const float*, const float*, int, int, float*);
using TransposeFn = void (*)(const Geo&, const float*, float*);
template <int K, int B>
constexpr ForwardFn forward_or_null() {
  if constexpr (B <= forward_vectors(K)) return &forward_block<K, B>;
  return nullptr;
}
template <int K, int B>
constexpr FilterFn filter_or_null() {
  if constexpr (B <= filter_taps(K)) return &filter_pass<K, B>;
  return nullptr;
}
template <int K, int... B>
constexpr auto forward_row(std::integer_sequence<int, B...>) {
  return std::array<ForwardFn, sizeof...(B)>{forward_or_null<K, B + 1>()...};
}
template <int K, int... B>
constexpr auto filter_row(std::integer_sequence<int, B...>) {
  return std::array<FilterFn, sizeof...(B)>{filter_or_null<K, B + 1>()...};
}
template <int... K>
constexpr auto forward_table(std::integer_sequence<int, K...>) {
  return std::array<std::array<ForwardFn, 4>, sizeof...(K)>{
      forward_row<K + 1>(std::make_integer_sequence<int, 4>{})...};
}
template <int... K>
constexpr auto filter_table(std::integer_sequence<int, K...>) {
  return std::array<std::array<FilterFn, 7>, sizeof...(K)>{
      filter_row<K + 1>(std::make_integer_sequence<int, 7>{})...};
}
template <int... K>
constexpr auto transpose_table(std::integer_sequence<int, K...>) {
  return std::array<TransposeFn, sizeof...(K)>{&transpose_dy<K + 1>...};
}
constexpr auto kForward = forward_table(std::make_integer_sequence<int, kMaxK>{});
constexpr auto kFilter = filter_table(std::make_integer_sequence<int, kMaxK>{});
constexpr auto kTranspose = transpose_table(std::make_integer_sequence<int, kMaxK>{});

}  // namespace

bool single_channel_rows_ok(const ConvDesc& d) {
  return d.c == 1 && d.k >= 1 && d.k <= kMaxK && d.plain() && d.stride_h == 1 && d.stride_w == 1 &&
         d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC && d.p() >= 1 && d.q() >= 1;
}

void single_channel_rows_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                 float* y) {
  if (!single_channel_rows_ok(d))
    raise(kExitFailure, "internal: single_channel_rows_forward called on a shape it does not take");
  const Geo g(d);
  static thread_local std::vector<float> wb_buf, bias_buf;  // the caller's thread; read by every worker
  wb_buf.resize(static_cast<size_t>(g.R) * g.S * g.K);
  for (int k = 0; k < g.K; ++k)
    for (int rs = 0; rs < g.R * g.S; ++rs)
      wb_buf[static_cast<size_t>(rs) * g.K + k] = w[static_cast<size_t>(k) * g.R * g.S + rs];
  bias_buf.assign(8, 0.f);
  if (b) std::copy(b, b + g.K, bias_buf.begin());
  const float *wb = wb_buf.data(), *bias = bias_buf.data();
  const int block = forward_vectors(g.K);
  const size_t in = static_cast<size_t>(d.h) * d.w, out = static_cast<size_t>(g.P) * g.Q * g.K;
  parallel_for(threads, d.n * out * g.R * g.S, d.n, [&](long long n) {
    const float* xp = padded_image(d, g, x + n * in);
    for (int p = 0; p < g.P; ++p) {
      float* yrow = y + n * out + static_cast<size_t>(p) * g.Q * g.K;
      for (int v0 = 0; v0 < g.nv; v0 += block)
        kForward[g.K - 1][std::min(block, g.nv - v0) - 1](g, xp, wb, bias, p, v0, yrow);
    }
  });
}

void single_channel_rows_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                         float* db) {
  if (!single_channel_rows_ok(d))
    raise(kExitFailure, "internal: single_channel_rows_backward_filter called on a shape it does not take");
  const Geo g(d);
  const int K = g.K, block = filter_taps(K);
  const long long chunks = (d.n + kChunk - 1) / kChunk;
  const size_t taps = static_cast<size_t>(g.R) * g.S * K * 8, slot = taps + K * 8;  // dw lanes, db lanes
  static thread_local std::vector<float> parts_buf, total;  // the caller's thread
  parts_buf.assign(static_cast<size_t>(chunks) * slot, 0.f);
  float* const parts = parts_buf.data();  // workers reach it through this pointer, not their own thread_local
  const size_t in = static_cast<size_t>(d.h) * d.w, out = static_cast<size_t>(g.P) * g.Q * K;
  parallel_for(threads, d.n * out * g.R * g.S, chunks, [&](long long c) {
    static thread_local std::vector<float> dyT;
    dyT.resize(K * g.plane());
    float* part = parts + c * slot;
    for (long long n = c * kChunk; n < std::min<long long>(d.n, (c + 1) * kChunk); ++n) {
      const float* xp = padded_image(d, g, x + n * in);
      kTranspose[K - 1](g, dy + n * out, dyT.data());
      for (int r = 0; r < g.R; ++r)
        for (int s0 = 0; s0 < g.S; s0 += block)
          kFilter[K - 1][std::min(block, g.S - s0) - 1](g, xp, dyT.data(), r, s0, part);
      if (!db) continue;
      for (int k = 0; k < K; ++k) {
        const float* plane = dyT.data() + k * g.plane();
        __m256 sum = _mm256_loadu_ps(part + taps + 8 * k);
        for (size_t m = 0; m < g.plane(); m += 8) sum = _mm256_add_ps(sum, _mm256_loadu_ps(plane + m));
        _mm256_storeu_ps(part + taps + 8 * k, sum);
      }
    }
  });
  // Chunks in order, then each sum's 8 lanes in order, onto KRSC dw.
  total.assign(slot, 0.f);
  for (long long c = 0; c < chunks; ++c)
    for (size_t i = 0; i < slot; ++i) total[i] += parts[c * slot + i];
  for (int rs = 0; rs < g.R * g.S; ++rs)
    for (int k = 0; k < K; ++k) {
      float s = 0.f;
      for (int l = 0; l < 8; ++l) s += total[(static_cast<size_t>(rs) * K + k) * 8 + l];
      dw[static_cast<size_t>(k) * g.R * g.S + rs] += s;
    }
  if (db)
    for (int k = 0; k < K; ++k) {
      float s = 0.f;
      for (int l = 0; l < 8; ++l) s += total[taps + 8 * k + l];
      db[k] += s;
    }
}

#endif

}  // namespace cnn
