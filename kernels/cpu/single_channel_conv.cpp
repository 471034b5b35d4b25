// One-input-channel convolutions on AVX2 (kernels/cpu/single_channel_conv.h).
// The loops over a register block's accumulators carry `#pragma GCC unroll`: left to -O3's late unrolling, g++
// keeps such __m256 arrays in memory and stores every accumulator at every FMA (half speed, LeNet-5's conv2).
#include "kernels/cpu/single_channel_conv.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/single_channel_rows.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_SINGLE_CHANNEL_AVX2 1
#endif

namespace cnn {

namespace {

// Output lane o = q*K + k of a row; vector j holds lanes 8j..8j+7, whose channels (8j + l) % K depend on j only
// through j % phases(K). So a filter tap is `phases` vectors of 8 channel values.
int phases_of(int k) { return k / std::gcd(k, 8); }

// The lane-pattern kernels below take K > 8; K <= 8 runs on single_channel_rows.cpp's.
bool shape_ok(const ConvDesc& d) {
  return d.c == 1 && d.k > 8 && d.plain() && d.stride_h == 1 && d.stride_w == 1 && d.x_layout == ActLayout::kNHWC &&
         d.y_layout == ActLayout::kNHWC && d.k >= 1 && phases_of(d.k) <= 4 && d.p() >= 1 && d.q() >= 1;
}

}  // namespace

#ifndef CNN_SINGLE_CHANNEL_AVX2

bool single_channel_forward_ok(const ConvDesc&) { return false; }
bool single_channel_filter_ok(const ConvDesc&) { return false; }
void single_channel_conv_forward(int, const ConvDesc&, const float*, const float*, const float*, float*) {
  raise(kExitFailure, "internal: single-channel convolution kernels need an AVX2/FMA build");
}
void single_channel_conv_backward_filter(int, const ConvDesc&, const float*, const float*, float*, float*) {
  raise(kExitFailure, "internal: single-channel convolution kernels need an AVX2/FMA build");
}

#else

namespace {

constexpr int kMaxFilterS = 7;
constexpr int kFilterAccumulators = 15;  // of the 16 ymm registers; the 16th holds a dy vector
constexpr int kChunk = 4;                // images per partial sum of backward-weights

// One call's geometry: rows of nvec vectors (Lo = Q*K lanes used, nvec a multiple of phases), the expanded input
// (Hp padded rows of Le floats: lane wp*K + k holds padded pixel wp) long enough for every tap of every vector.
struct Geo {
  int K, R, S, P, Q, ph, Hp, Lo, nvec, Le, xs_len;
  explicit Geo(const ConvDesc& d)
      : K(d.k), R(d.r), S(d.s), P(d.p()), Q(d.q()), ph(phases_of(d.k)), Hp(d.h + 2 * d.pad_h), Lo(d.q() * d.k) {
    nvec = ((Lo + 7) / 8 + ph - 1) / ph * ph;
    Le = (nvec * 8 + (S - 1) * K + 15) / 16 * 16;  // whole cache lines: rows start 64-byte aligned
    xs_len = Le / K + 9;  // the staged padded input row: every permute's 8-pixel source lies inside
  }
  size_t image_in(const ConvDesc& d) const { return static_cast<size_t>(d.h) * d.w; }
  size_t image_out() const { return static_cast<size_t>(P) * Lo; }
};

// xe = the padded image expanded K times: row hp, lane wp*K + k = x[hp - pad_h][wp - pad_w] (0 outside).
// Vector o's lanes read pixels floor((8o + l) / K) = floor(8o / K) + idx[o % ph][l]: one load and one permute.
// With o = o0 + u, o0 a multiple of ph (8 * o0 a multiple of K): floor(8o / K) = 8 * o0 / K + floor(8u / K).
void expand_image(const ConvDesc& d, const Geo& g, const float* x, float* xs, float* xe) {
  __m256i idx[4];
  int off[4];
  for (int u = 0; u < g.ph; ++u) {
    alignas(32) int v[8];
    for (int l = 0; l < 8; ++l) v[l] = ((8 * u) % g.K + l) / g.K;
    idx[u] = _mm256_load_si256(reinterpret_cast<const __m256i*>(v));
    off[u] = 8 * u / g.K;
  }
  const int step = 8 * g.ph / g.K;  // pixels per ph vectors
  std::memset(xs, 0, sizeof(float) * g.xs_len);  // the padding columns stay 0; each row rewrites its pixels
  for (int hp = 0; hp < g.Hp; ++hp) {
    float* row = xe + static_cast<size_t>(hp) * g.Le;
    const int h = hp - d.pad_h;
    if (h < 0 || h >= d.h) {
      std::memset(row, 0, sizeof(float) * g.Le);
      continue;
    }
    std::memcpy(xs + d.pad_w, x + static_cast<size_t>(h) * d.w, sizeof(float) * d.w);
    const float* base = xs;
    for (int o0 = 0; o0 < g.Le / 8; o0 += g.ph, base += step)
      for (int u = 0; u < g.ph && o0 + u < g.Le / 8; ++u)
        _mm256_storeu_ps(row + 8 * (o0 + u), _mm256_permutevar8x32_ps(_mm256_loadu_ps(base + off[u]), idx[u]));
  }
}

// Filter tap (r, s) as ph vectors: lane l of vector u = w[(8u + l) % K][r][s] (KRSC, one channel).
void tap_vectors(const ConvDesc& d, const Geo& g, const float* w, float* wv) {
  for (int r = 0; r < g.R; ++r)
    for (int s = 0; s < g.S; ++s)
      for (int u = 0; u < g.ph; ++u)
        for (int l = 0; l < 8; ++l) {
          const int k = (8 * u + l) % g.K;
          wv[((r * g.S + s) * g.ph + u) * 8 + l] = w[(static_cast<size_t>(k) * g.R + r) * g.S + s];
        }
}

// Vectors j0..j0+B-1 of output row p: B accumulators, the ph tap vectors of (r, s) in registers, the expanded
// input read straight from L1 (one load per FMA).
template <int PH, int B>
void forward_block(const Geo& g, const float* xe, const float* wv, const float* bias, int p, int j0, float* out) {
  __m256 acc[B];
#pragma GCC unroll 16
  for (int i = 0; i < B; ++i) acc[i] = _mm256_loadu_ps(bias + 8 * (i % PH));
  for (int r = 0; r < g.R; ++r) {
    const float* xr = xe + static_cast<size_t>(p + r) * g.Le + 8 * j0;
    for (int s = 0; s < g.S; ++s) {
      const float* tap = wv + (r * g.S + s) * PH * 8;
      __m256 w[PH];
#pragma GCC unroll 16
      for (int u = 0; u < PH; ++u) w[u] = _mm256_loadu_ps(tap + 8 * u);
      const float* src = xr + s * g.K;
#pragma GCC unroll 16
      for (int i = 0; i < B; ++i) acc[i] = _mm256_fmadd_ps(w[i % PH], _mm256_loadu_ps(src + 8 * i), acc[i]);
    }
  }
  // Vectors inside the row go straight to y; one that ends past it (Q*K not a multiple of 8) through tail.
#pragma GCC unroll 16
  for (int i = 0; i < B; ++i) {
    const int at = 8 * (j0 + i);
    if (at + 8 <= g.Lo) {
      _mm256_storeu_ps(out + at, acc[i]);
    } else if (at < g.Lo) {
      alignas(32) float tail[8];
      _mm256_store_ps(tail, acc[i]);
      std::memcpy(out + at, tail, sizeof(float) * (g.Lo - at));
    }
  }
}

using ForwardFn = void (*)(const Geo&, const float*, const float*, const float*, int, int, float*);
template <int PH, int... I>
ForwardFn forward_pick(int n, std::integer_sequence<int, I...>) {
  static constexpr ForwardFn table[] = {&forward_block<PH, PH * (I + 1)>...};
  return table[n / PH - 1];
}
// The block of n vectors (a multiple of ph, at most block_of(ph)).
int block_of(int ph) { return ph == 4 ? 8 : 12; }
ForwardFn forward_fn(int ph, int n) {
  switch (ph) {
    case 1: return forward_pick<1>(n, std::make_integer_sequence<int, 12>{});
    case 2: return forward_pick<2>(n, std::make_integer_sequence<int, 6>{});
    case 3: return forward_pick<3>(n, std::make_integer_sequence<int, 4>{});
    default: return forward_pick<4>(n, std::make_integer_sequence<int, 2>{});
  }
}

// dw partial sums over one image: for each r, S*PH accumulators (tap s, phase u) of dy-row vector times the
// expanded input shifted by s pixels, over every output row; part [R][S][PH][8] is read and written back.
template <int PH, int S>
void filter_image(const Geo& g, const float* xe, const float* dy, float* part) {
  for (int r = 0; r < g.R; ++r) {
    float* pr = part + static_cast<size_t>(r) * S * PH * 8;
    __m256 acc[S * PH];
#pragma GCC unroll 16
    for (int a = 0; a < S * PH; ++a) acc[a] = _mm256_loadu_ps(pr + 8 * a);
    for (int p = 0; p < g.P; ++p) {
      const float* dr = dy + static_cast<size_t>(p) * g.nvec * 8;
      const float* xr = xe + static_cast<size_t>(p + r) * g.Le;
      for (int j0 = 0; j0 < g.nvec; j0 += PH)
#pragma GCC unroll 16
        for (int u = 0; u < PH; ++u) {
          const int j = j0 + u;
          const __m256 dv = _mm256_loadu_ps(dr + 8 * j);
#pragma GCC unroll 16
          for (int s = 0; s < S; ++s)
            acc[s * PH + u] = _mm256_fmadd_ps(dv, _mm256_loadu_ps(xr + 8 * j + s * g.K), acc[s * PH + u]);
        }
    }
#pragma GCC unroll 16
    for (int a = 0; a < S * PH; ++a) _mm256_storeu_ps(pr + 8 * a, acc[a]);
  }
}

using FilterFn = void (*)(const Geo&, const float*, const float*, float*);
template <int PH, int S>
constexpr FilterFn filter_or_null() {
  if constexpr (S * PH <= kFilterAccumulators) return &filter_image<PH, S>;
  return nullptr;
}
template <int PH, int... I>
FilterFn filter_pick(int s, std::integer_sequence<int, I...>) {
  static constexpr FilterFn table[] = {filter_or_null<PH, I + 1>()...};
  return table[s - 1];
}
FilterFn filter_fn(int ph, int s) {
  const auto all = std::make_integer_sequence<int, kMaxFilterS>{};
  switch (ph) {
    case 1: return filter_pick<1>(s, all);
    case 2: return filter_pick<2>(s, all);
    case 3: return filter_pick<3>(s, all);
    default: return filter_pick<4>(s, all);
  }
}

// Per-thread scratch, grown once: the staged input row, the expanded image, dy rows padded to whole vectors.
struct Scratch {
  std::vector<float> xs, xe_buf, rows;
  // The expanded image, 64-byte aligned (fewer loads split across cache lines).
  float* xe(const Geo& g) {
    xe_buf.resize(static_cast<size_t>(g.Hp) * g.Le + 16);
    return xe_buf.data() + (16 - reinterpret_cast<uintptr_t>(xe_buf.data()) / 4 % 16) % 16;
  }
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

}  // namespace

bool single_channel_forward_ok(const ConvDesc& d) { return single_channel_rows_ok(d) || shape_ok(d); }
bool single_channel_filter_ok(const ConvDesc& d) {
  return single_channel_rows_ok(d) ||
         (shape_ok(d) && d.s <= kMaxFilterS && d.s * phases_of(d.k) <= kFilterAccumulators);
}

void single_channel_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                 float* y) {
  if (single_channel_rows_ok(d)) return single_channel_rows_forward(threads, d, x, w, b, y);
  const Geo g(d);
  static thread_local std::vector<float> wv_buf, bias_buf;  // the caller's thread; read by every worker
  wv_buf.resize(static_cast<size_t>(g.R) * g.S * g.ph * 8);
  bias_buf.assign(static_cast<size_t>(g.ph) * 8, 0.f);
  const float *wv = wv_buf.data(), *bias = bias_buf.data();
  tap_vectors(d, g, w, wv_buf.data());
  if (b)
    for (int i = 0; i < g.ph * 8; ++i) bias_buf[i] = b[i % g.K];
  const int block = block_of(g.ph);
  const size_t work = static_cast<size_t>(d.n) * g.image_out() * g.R * g.S;
  parallel_for(threads, work, d.n, [&](long long n) {
    Scratch& sc = scratch();
    sc.xs.resize(g.xs_len);
    float* xe = sc.xe(g);
    expand_image(d, g, x + n * g.image_in(d), sc.xs.data(), xe);
    for (int p = 0; p < g.P; ++p) {
      float* yr = y + n * g.image_out() + static_cast<size_t>(p) * g.Lo;
      for (int j0 = 0; j0 < g.nvec; j0 += block)
        forward_fn(g.ph, std::min(block, g.nvec - j0))(g, xe, wv, bias, p, j0, yr);
    }
  });
}

void single_channel_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                         float* db) {
  if (single_channel_rows_ok(d)) return single_channel_rows_backward_filter(threads, d, x, dy, dw, db);
  const Geo g(d);
  const FilterFn fn = filter_fn(g.ph, g.S);
  if (!fn) raise(kExitFailure, "internal: single_channel_conv_backward_filter called on a shape it does not take");
  const long long chunks = (d.n + kChunk - 1) / kChunk;
  const size_t taps = static_cast<size_t>(g.R) * g.S * g.ph * 8, slot = taps + g.ph * 8;  // dw lanes, db lanes
  static thread_local std::vector<float> parts_buf, tw, tb;  // the caller's thread
  parts_buf.assign(static_cast<size_t>(chunks) * slot, 0.f);
  float* const parts = parts_buf.data();  // workers reach it through this pointer, not their own thread_local
  const size_t work = static_cast<size_t>(d.n) * g.image_out() * g.R * g.S;
  parallel_for(threads, work, chunks, [&](long long c) {
    Scratch& sc = scratch();
    sc.xs.resize(g.xs_len);
    float* xe = sc.xe(g);
    // dy rows as nvec vectors: dy itself where a row fills them, else copies padded with zeros.
    const bool staged = g.nvec * 8 != g.Lo;
    if (staged) sc.rows.assign(static_cast<size_t>(g.P) * g.nvec * 8, 0.f);
    float* part = parts + c * slot;
    for (long long n = c * kChunk; n < std::min<long long>(d.n, (c + 1) * kChunk); ++n) {
      expand_image(d, g, x + n * g.image_in(d), sc.xs.data(), xe);
      const float* dyn = dy + n * g.image_out();
      if (staged)
        for (int p = 0; p < g.P; ++p)
          std::memcpy(sc.rows.data() + static_cast<size_t>(p) * g.nvec * 8, dyn + static_cast<size_t>(p) * g.Lo,
                      sizeof(float) * g.Lo);
      const float* rows = staged ? sc.rows.data() : dyn;
      fn(g, xe, rows, part);
      if (!db) continue;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (size_t j0 = 0; j0 < static_cast<size_t>(g.P) * g.nvec; j0 += g.ph)
        for (int u = 0; u < g.ph; ++u) acc[u] = _mm256_add_ps(acc[u], _mm256_loadu_ps(rows + 8 * (j0 + u)));
      for (int u = 0; u < g.ph; ++u)
        _mm256_storeu_ps(part + taps + 8 * u, _mm256_add_ps(_mm256_loadu_ps(part + taps + 8 * u), acc[u]));
    }
  });
  // Lanes fold onto their channels, chunk by chunk in order.
  tw.assign(static_cast<size_t>(g.K) * g.R * g.S, 0.f);
  tb.assign(g.K, 0.f);
  for (long long c = 0; c < chunks; ++c) {
    const float* part = parts + c * slot;
    for (int r = 0; r < g.R; ++r)
      for (int s = 0; s < g.S; ++s)
        for (int u = 0; u < g.ph; ++u)
          for (int l = 0; l < 8; ++l)
            tw[(static_cast<size_t>((8 * u + l) % g.K) * g.R + r) * g.S + s] +=
                part[((r * g.S + s) * g.ph + u) * 8 + l];
    for (int i = 0; i < g.ph * 8; ++i) tb[i % g.K] += part[taps + i];
  }
  for (size_t i = 0; i < tw.size(); ++i) dw[i] += tw[i];
  if (db)
    for (int k = 0; k < g.K; ++k) db[k] += tb[k];
}

#endif

}  // namespace cnn
