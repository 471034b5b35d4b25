// Few-channel convolutions on AVX2 (kernels/cpu/small_channel_conv.h), and on AVX-512F for 16 and 32 output
// channels (LeNet-5's conv2): there a pixel's K sums are one or two 512-bit registers instead of two or four 256-bit
// ones, so each broadcast input and each loaded filter or gradient vector feeds twice the lanes. Every lane does
// the same FMAs in the same order as in the AVX2 code, and backward-data reduces the lanes through the same
// 256-bit steps, so the results have the same bits (tests/unit/test_small_conv.cpp). Only the functions
// marked CNN_AVX512 (a target attribute) contain AVX-512 instructions, and they run only where
// avx512_kernels_enabled() says so (CNNTRAIN_AVX512_KERNELS=0: the AVX2 code), as in winograd16_avx512.cpp. They
// repeat the AVX2 kernels' loops with 512-bit types rather than share a template over the vector type: the AVX-512
// instantiations would need the target attribute on code the AVX2 build also compiles.
// The loops over a register block's accumulators carry `#pragma GCC unroll`: left to -O3's late unrolling, g++
// keeps such __m256 arrays in memory and stores every accumulator at every FMA (half speed, LeNet-5's conv2).
#include "kernels/cpu/small_channel_conv.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_SMALL_CHANNEL_AVX2 1
#define CNN_AVX512 __attribute__((target("avx512f")))
#endif

namespace cnn {

#ifndef CNN_SMALL_CHANNEL_AVX2

bool small_channel_ok(const ConvDesc&) { return false; }
void small_channel_conv_backward_filter(int, const ConvDesc&, const float*, const float*, float*, float*) {
  raise(kExitFailure, "internal: few-channel convolution kernels need an AVX2/FMA build");
}
void small_channel_conv_backward_data(int, const ConvDesc&, const float*, const float*, float*) {
  raise(kExitFailure, "internal: few-channel convolution kernels need an AVX2/FMA build");
}

#else

namespace {

constexpr int kChunk = 8;  // images per partial sum of backward-weights

// Input channels per register block for KV = K/8 output vectors: block*KV accumulators, KV dy vectors and one
// broadcast within the 16 ymm registers.
constexpr int block_of(int kv) { return kv == 1 ? 8 : kv == 2 ? 6 : kv == 3 ? 3 : 2; }

struct Geo {
  int C, K, KV, R, S, P, Q, Hp, Wp;
  explicit Geo(const ConvDesc& d)
      : C(d.c), K(d.k), KV(d.k / 8), R(d.r), S(d.s), P(d.p()), Q(d.q()), Hp(d.h + 2 * d.pad_h),
        Wp(d.w + 2 * d.pad_w) {}
};

// The filters KRSC -> [R][S][C][K]: a tap's K-vector per input channel.
const float* rsck_filters(const Geo& g, const float* w, std::vector<float>& buf) {
  const size_t rsc = static_cast<size_t>(g.R) * g.S * g.C;
  buf.resize(rsc * g.K);
  for (int k = 0; k < g.K; ++k)
    for (size_t i = 0; i < rsc; ++i) buf[i * g.K + k] = w[k * rsc + i];
  return buf.data();
}

// The image zero-padded (NHWC, Hp x Wp x C), or x itself when there is no padding.
const float* padded_image(const ConvDesc& d, const Geo& g, const float* x, std::vector<float>& buf) {
  if (d.pad_h == 0 && d.pad_w == 0) return x;
  buf.assign(static_cast<size_t>(g.Hp) * g.Wp * g.C, 0.f);
  const size_t row = static_cast<size_t>(d.w) * g.C;
  for (int h = 0; h < d.h; ++h)
    std::memcpy(buf.data() + ((static_cast<size_t>(h) + d.pad_h) * g.Wp + d.pad_w) * g.C, x + h * row,
                sizeof(float) * row);
  return buf.data();
}

// part [R][S][C][K] += one image's dw for input channels c0..c0+CB-1: per tap, CB*KV sums over its pixels.
template <int CB, int KV>
void filter_block(const Geo& g, const float* xp, const float* dy, int c0, float* part) {
  for (int r = 0; r < g.R; ++r)
    for (int s = 0; s < g.S; ++s) {
      float* pt = part + ((static_cast<size_t>(r) * g.S + s) * g.C + c0) * g.K;
      __m256 acc[CB][KV];
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < KV; ++v) acc[i][v] = _mm256_loadu_ps(pt + i * g.K + 8 * v);
      const int P = g.P, Q = g.Q, C = g.C;
      const size_t x_row = static_cast<size_t>(g.Wp) * C;
      const float* __restrict xr = xp + ((static_cast<size_t>(r)) * g.Wp + s) * C + c0;
      const float* __restrict dr = dy;
      for (int p = 0; p < P; ++p, xr += x_row)
        for (int q = 0; q < Q; ++q, dr += 8 * KV) {
          __m256 dv[KV];
#pragma GCC unroll 16
          for (int v = 0; v < KV; ++v) dv[v] = _mm256_loadu_ps(dr + 8 * v);
          const float* xq = xr + q * C;
#pragma GCC unroll 16
          for (int i = 0; i < CB; ++i) {
            const __m256 b = _mm256_broadcast_ss(xq + i);
#pragma GCC unroll 16
            for (int v = 0; v < KV; ++v) acc[i][v] = _mm256_fmadd_ps(b, dv[v], acc[i][v]);
          }
        }
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < KV; ++v) _mm256_storeu_ps(pt + i * g.K + 8 * v, acc[i][v]);
    }
}

// y for output pixels (p, q0..q0+PB-1): PB*KV sums over the taps and input channels, a tap's row of S*C inputs
// contiguous in the padded image and its filters as wf [R][S*C][K].
template <int PB, int KV>
void forward_block(const Geo& g, const float* xp, const float* wf, const float* bias, int p, int q0, float* y) {
  constexpr int K = 8 * KV;
  __m256 acc[PB * KV];
#pragma GCC unroll 16
  for (int a = 0; a < PB * KV; ++a) acc[a] = _mm256_loadu_ps(bias + 8 * (a % KV));
  const int C = g.C, SC = g.S * g.C, R = g.R;
  const size_t x_row = static_cast<size_t>(g.Wp) * C;
  const float* __restrict xr = xp + (static_cast<size_t>(p) * g.Wp + q0) * C;
  const float* __restrict wr = wf;
  for (int r = 0; r < R; ++r, xr += x_row, wr += SC * K) {
    for (int j = 0; j < SC; ++j) {
      __m256 wv[KV];
#pragma GCC unroll 4
      for (int v = 0; v < KV; ++v) wv[v] = _mm256_loadu_ps(wr + j * K + 8 * v);
#pragma GCC unroll 16
      for (int a = 0; a < PB * KV; ++a)
        acc[a] = _mm256_fmadd_ps(_mm256_broadcast_ss(xr + j + (a / KV) * C), wv[a % KV], acc[a]);
    }
  }
  float* out = y + (static_cast<size_t>(p) * g.Q + q0) * K;
#pragma GCC unroll 16
  for (int a = 0; a < PB * KV; ++a) _mm256_storeu_ps(out + 8 * a, acc[a]);
}

// Sums of up to 8 vectors, one per lane (a fixed order of additions).
__m256 lane_sums(const __m256* a, int n) {
  __m256 v[8];
  for (int i = 0; i < 8; ++i) v[i] = i < n ? a[i] : _mm256_setzero_ps();
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// dx of input pixel (ih, iw), channels c0..c0+CB-1: its taps' dy vectors times the filters' K-vectors
// (wt [R][S][C][K]), summed over the lanes at the end.
template <int CB, int KV>
void data_block(const ConvDesc& d, const Geo& g, const float* dy, const float* wt, int ih, int iw, int c0,
                float* out) {
  constexpr int K = 8 * KV;
  __m256 acc[CB][KV];
#pragma GCC unroll 16
  for (int i = 0; i < CB; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < KV; ++v) acc[i][v] = _mm256_setzero_ps();
  const int S = g.S, Q = g.Q, C = g.C;
  const int r_lo = std::max(0, ih + d.pad_h - g.P + 1), r_hi = std::min(g.R, ih + d.pad_h + 1);
  const int s_lo = std::max(0, iw + d.pad_w - Q + 1), s_hi = std::min(S, iw + d.pad_w + 1);
  for (int r = r_lo; r < r_hi; ++r) {
    // Tap (r, s) reads dy pixel (ih + pad_h - r, iw + pad_w - s): one pixel left per s.
    const float* __restrict dv = dy + (static_cast<size_t>(ih + d.pad_h - r) * Q + (iw + d.pad_w - s_lo)) * K;
    const float* __restrict wp = wt + ((static_cast<size_t>(r) * S + s_lo) * C + c0) * K;
    for (int s = s_lo; s < s_hi; ++s, dv -= K, wp += C * K) {
      __m256 dd[KV];
#pragma GCC unroll 16
      for (int v = 0; v < KV; ++v) dd[v] = _mm256_loadu_ps(dv + 8 * v);
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < KV; ++v)
          acc[i][v] = _mm256_fmadd_ps(dd[v], _mm256_loadu_ps(wp + i * K + 8 * v), acc[i][v]);
    }
  }
  __m256 per_channel[CB];
#pragma GCC unroll 16
  for (int i = 0; i < CB; ++i) {
    per_channel[i] = acc[i][0];
    for (int v = 1; v < KV; ++v) per_channel[i] = _mm256_add_ps(per_channel[i], acc[i][v]);
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, lane_sums(per_channel, CB));
  std::memcpy(out, sums, sizeof(float) * CB);
}

// --- AVX-512F: K = 16 * KZ output channels, KZ = 1 or 2 ---
// Register blocks: backward-weights and backward-data up to 8 input channels (all of them: C <= 8; lane_sums
// takes 8), the forward pass 16 or 12 output pixels (their sums, KZ filter vectors and a broadcast in 32 zmm).
constexpr int block512_of(int kz, bool forward) { return forward ? (kz == 1 ? 16 : 12) : 8; }

// filter_block with KZ 512-bit vectors per K: each lane's sums in the same order.
template <int CB, int KZ>
CNN_AVX512 void filter_block512(const Geo& g, const float* xp, const float* dy, int c0, float* part) {
  for (int r = 0; r < g.R; ++r)
    for (int s = 0; s < g.S; ++s) {
      float* pt = part + ((static_cast<size_t>(r) * g.S + s) * g.C + c0) * g.K;
      __m512 acc[CB][KZ];
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < KZ; ++v) acc[i][v] = _mm512_loadu_ps(pt + i * g.K + 16 * v);
      const int P = g.P, Q = g.Q, C = g.C;
      const size_t x_row = static_cast<size_t>(g.Wp) * C;
      const float* __restrict xr = xp + ((static_cast<size_t>(r)) * g.Wp + s) * C + c0;
      const float* __restrict dr = dy;
      for (int p = 0; p < P; ++p, xr += x_row)
        for (int q = 0; q < Q; ++q, dr += 16 * KZ) {
          __m512 dv[KZ];
#pragma GCC unroll 2
          for (int v = 0; v < KZ; ++v) dv[v] = _mm512_loadu_ps(dr + 16 * v);
          const float* xq = xr + q * C;
#pragma GCC unroll 16
          for (int i = 0; i < CB; ++i) {
            const __m512 b = _mm512_set1_ps(xq[i]);
#pragma GCC unroll 2
            for (int v = 0; v < KZ; ++v) acc[i][v] = _mm512_fmadd_ps(b, dv[v], acc[i][v]);
          }
        }
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < KZ; ++v) _mm512_storeu_ps(pt + i * g.K + 16 * v, acc[i][v]);
    }
}

// forward_block with KZ 512-bit vectors per K.
template <int PB, int KZ>
CNN_AVX512 void forward_block512(const Geo& g, const float* xp, const float* wf, const float* bias, int p, int q0,
                                 float* y) {
  constexpr int K = 16 * KZ;
  __m512 acc[PB * KZ];
#pragma GCC unroll 32
  for (int a = 0; a < PB * KZ; ++a) acc[a] = _mm512_loadu_ps(bias + 16 * (a % KZ));
  const int C = g.C, SC = g.S * g.C, R = g.R;
  const size_t x_row = static_cast<size_t>(g.Wp) * C;
  const float* __restrict xr = xp + (static_cast<size_t>(p) * g.Wp + q0) * C;
  const float* __restrict wr = wf;
  for (int r = 0; r < R; ++r, xr += x_row, wr += SC * K) {
    for (int j = 0; j < SC; ++j) {
      __m512 wv[KZ];
#pragma GCC unroll 2
      for (int v = 0; v < KZ; ++v) wv[v] = _mm512_loadu_ps(wr + j * K + 16 * v);
#pragma GCC unroll 32
      for (int a = 0; a < PB * KZ; ++a)
        acc[a] = _mm512_fmadd_ps(_mm512_set1_ps(xr[j + (a / KZ) * C]), wv[a % KZ], acc[a]);
    }
  }
  float* out = y + (static_cast<size_t>(p) * g.Q + q0) * K;
#pragma GCC unroll 32
  for (int a = 0; a < PB * KZ; ++a) _mm512_storeu_ps(out + 16 * a, acc[a]);
}

// The halves of a 512-bit vector. GCC 12's intrinsics for them pass an undefined vector as the unused merge operand
// and warn that it is uninitialised (GCC bug 105593, fixed in 13); nothing reads it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
CNN_AVX512 inline __m256 low_half(__m512 a) { return _mm512_castps512_ps256(a); }
CNN_AVX512 inline __m256 high_half(__m512 a) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}
#pragma GCC diagnostic pop

// out[0 .. CB - 1] = the sums of each channel's KZ vectors' lanes, added as the AVX2 code adds its 256-bit vectors
// (low half, high half, in order) and then reduced by lane_sums.
template <int CB, int KZ>
CNN_AVX512 void store_lane_sums(const __m512 (&acc)[CB][KZ], float* out) {
  __m256 per_channel[CB];
#pragma GCC unroll 16
  for (int i = 0; i < CB; ++i) {
    per_channel[i] = _mm256_add_ps(low_half(acc[i][0]), high_half(acc[i][0]));
    for (int v = 1; v < KZ; ++v) {
      per_channel[i] = _mm256_add_ps(per_channel[i], low_half(acc[i][v]));
      per_channel[i] = _mm256_add_ps(per_channel[i], high_half(acc[i][v]));
    }
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, lane_sums(per_channel, CB));
  std::memcpy(out, sums, sizeof(float) * CB);
}

// data_block with KZ 512-bit vectors per K (the lanes reduced as the AVX2 code reduces them: store_lane_sums).
template <int CB, int KZ>
CNN_AVX512 void data_block512(const ConvDesc& d, const Geo& g, const float* dy, const float* wt, int ih, int iw,
                              int c0, float* out) {
  constexpr int K = 16 * KZ;
  __m512 acc[CB][KZ];
#pragma GCC unroll 16
  for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < KZ; ++v) acc[i][v] = _mm512_setzero_ps();
  const int S = g.S, Q = g.Q, C = g.C;
  const int r_lo = std::max(0, ih + d.pad_h - g.P + 1), r_hi = std::min(g.R, ih + d.pad_h + 1);
  const int s_lo = std::max(0, iw + d.pad_w - Q + 1), s_hi = std::min(S, iw + d.pad_w + 1);
  for (int r = r_lo; r < r_hi; ++r) {
    const float* __restrict dv = dy + (static_cast<size_t>(ih + d.pad_h - r) * Q + (iw + d.pad_w - s_lo)) * K;
    const float* __restrict wp = wt + ((static_cast<size_t>(r) * S + s_lo) * C + c0) * K;
    for (int s = s_lo; s < s_hi; ++s, dv -= K, wp += C * K) {
      __m512 dd[KZ];
#pragma GCC unroll 2
      for (int v = 0; v < KZ; ++v) dd[v] = _mm512_loadu_ps(dv + 16 * v);
#pragma GCC unroll 16
      for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < KZ; ++v)
          acc[i][v] = _mm512_fmadd_ps(dd[v], _mm512_loadu_ps(wp + i * K + 16 * v), acc[i][v]);
    }
  }
  store_lane_sums<CB, KZ>(acc, out);
}

// data_block512 for two neighbouring input pixels (ih, iw) and (ih, iw + 1), written to out and out + C: their
// taps meet the same dy pixels (tap s of the first where the second has tap s + 1), so each dy vector loaded
// feeds both pixels' sums, and twice the independent FMA chains hide the FMA latency that one pixel's CB * KZ
// sums leave exposed. Each pixel's sums take its taps in the order data_block512 takes them (same bits).
template <int CB, int KZ>
CNN_AVX512 void data_pair512(const ConvDesc& d, const Geo& g, const float* dy, const float* wt, int ih, int iw,
                             int c0, float* out) {
  constexpr int K = 16 * KZ;
  __m512 a0[CB][KZ], a1[CB][KZ];
#pragma GCC unroll 16
  for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < KZ; ++v) a0[i][v] = a1[i][v] = _mm512_setzero_ps();
  const int S = g.S, Q = g.Q, C = g.C;
  const int r_lo = std::max(0, ih + d.pad_h - g.P + 1), r_hi = std::min(g.R, ih + d.pad_h + 1);
  // dy column j is tap s = iw + pad_w - j of the first pixel and tap s + 1 of the second; from the second's tap 0
  // (j_top) down to the first's tap S - 1 (j_bot), both pixels' taps where both lie inside dy.
  const int j_top = iw + d.pad_w + 1, j_bot = iw + d.pad_w - S + 1;
  const int hi = std::min(j_top - 1, Q - 1), lo = std::max(j_bot + 1, 0);
  const auto fma_tap = [](__m512(&acc)[CB][KZ], const __m512* dd, const float* w) CNN_AVX512 {
#pragma GCC unroll 16
    for (int i = 0; i < CB; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < KZ; ++v) acc[i][v] = _mm512_fmadd_ps(dd[v], _mm512_loadu_ps(w + i * K + 16 * v), acc[i][v]);
  };
  const auto load_dy = [](__m512* dd, const float* p) CNN_AVX512 {
#pragma GCC unroll 2
    for (int v = 0; v < KZ; ++v) dd[v] = _mm512_loadu_ps(p + 16 * v);
  };
  for (int r = r_lo; r < r_hi; ++r) {
    const float* __restrict dyr = dy + static_cast<size_t>(ih + d.pad_h - r) * Q * K;
    const float* __restrict wr = wt + (static_cast<size_t>(r) * S * C + c0) * K;  // tap s at wr + s * C * K
    __m512 dd[KZ];
    if (j_top <= Q - 1) {
      load_dy(dd, dyr + static_cast<size_t>(j_top) * K);
      fma_tap(a1, dd, wr);
    }
    for (int j = hi; j >= lo; --j) {
      load_dy(dd, dyr + static_cast<size_t>(j) * K);
      const float* w0 = wr + static_cast<size_t>(iw + d.pad_w - j) * C * K;
      fma_tap(a0, dd, w0);
      fma_tap(a1, dd, w0 + C * K);
    }
    if (j_bot >= 0) {
      load_dy(dd, dyr + static_cast<size_t>(j_bot) * K);
      fma_tap(a0, dd, wr + static_cast<size_t>(S - 1) * C * K);
    }
  }
  store_lane_sums<CB, KZ>(a0, out);
  store_lane_sums<CB, KZ>(a1, out + C);
}

using ForwardFn = void (*)(const Geo&, const float*, const float*, const float*, int, int, float*);
using FilterFn = void (*)(const Geo&, const float*, const float*, int, float*);
using DataFn = void (*)(const ConvDesc&, const Geo&, const float*, const float*, int, int, int, float*);
// Each kernel's instantiations by block (1..block_of(KV)) and KV (1..4), picked at run time.
template <int B, int KV>
struct ForwardKernel {
  static constexpr ForwardFn fn = &forward_block<B, KV>;
};
template <int B, int KV>
struct FilterKernel {
  static constexpr FilterFn fn = &filter_block<B, KV>;
};
template <int B, int KV>
struct DataKernel {
  static constexpr DataFn fn = &data_block<B, KV>;
};
template <int B, int KZ>
struct Forward512 {
  static constexpr ForwardFn fn = &forward_block512<B, KZ>;
};
template <int B, int KZ>
struct Filter512 {
  static constexpr FilterFn fn = &filter_block512<B, KZ>;
};
template <int B, int KZ>
struct Data512 {
  static constexpr DataFn fn = &data_block512<B, KZ>;
};
template <int B, int KZ>
struct DataPair512 {
  static constexpr DataFn fn = &data_pair512<B, KZ>;
};
template <template <int, int> class Kernel, int KV, int... I>
auto pick(int block, std::integer_sequence<int, I...>) {
  static constexpr decltype(Kernel<1, KV>::fn) table[] = {Kernel<I + 1, KV>::fn...};
  return table[block - 1];
}
template <template <int, int> class Kernel>
auto kernel_for(int kv, int block) {
  switch (kv) {
    case 1: return pick<Kernel, 1>(block, std::make_integer_sequence<int, block_of(1)>{});
    case 2: return pick<Kernel, 2>(block, std::make_integer_sequence<int, block_of(2)>{});
    case 3: return pick<Kernel, 3>(block, std::make_integer_sequence<int, block_of(3)>{});
    default: return pick<Kernel, 4>(block, std::make_integer_sequence<int, block_of(4)>{});
  }
}
// The AVX-512 instantiations by block (1..block512_of(KZ)) and KZ (1, 2).
template <template <int, int> class Kernel, bool kForward>
auto kernel512_for(int kz, int block) {
  if (kz == 1) return pick<Kernel, 1>(block, std::make_integer_sequence<int, block512_of(1, kForward)>{});
  return pick<Kernel, 2>(block, std::make_integer_sequence<int, block512_of(2, kForward)>{});
}
// Whether a K-output-channel convolution runs on the AVX-512 code: K = 16 or 32 and avx512_kernels_enabled().
bool use512(const Geo& g) { return g.K % 16 == 0 && avx512_kernels_enabled(); }

}  // namespace

bool small_channel_ok(const ConvDesc& d) {
  return d.c >= 2 && d.c <= 8 && d.k % 8 == 0 && d.k >= 8 && d.k <= 32 && d.plain() && d.stride_h == 1 &&
         d.stride_w == 1 && d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC && d.p() >= 1 &&
         d.q() >= 1;
}

void small_channel_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b,
                                float* y) {
  const Geo g(d);
  static thread_local std::vector<float> wf_buf, bias_buf;  // the caller's thread
  bias_buf.assign(g.K, 0.f);
  if (b) std::copy(b, b + g.K, bias_buf.begin());
  const float *wf = rsck_filters(g, w, wf_buf), *bias = bias_buf.data();
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(g.P) * g.Q * g.K;
  const bool z = use512(g);
  const int block = z ? block512_of(g.K / 16, true) : block_of(g.KV);
  parallel_for(threads, d.n * out * g.R * g.S * g.C, d.n, [&](long long n) {
    static thread_local std::vector<float> pad_buf;
    const float* xp = padded_image(d, g, x + n * in, pad_buf);
    for (int p = 0; p < g.P; ++p)
      for (int q0 = 0; q0 < g.Q; q0 += block) {
        const int nb = std::min(block, g.Q - q0);
        (z ? kernel512_for<Forward512, true>(g.K / 16, nb) : kernel_for<ForwardKernel>(g.KV, nb))(
            g, xp, wf, bias, p, q0, y + n * out);
      }
  });
}

void small_channel_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                                        float* db) {
  const Geo g(d);
  const long long chunks = (d.n + kChunk - 1) / kChunk;
  const size_t taps = static_cast<size_t>(g.R) * g.S * g.C * g.K, slot = taps + g.K;  // dw lanes, db lanes
  static thread_local std::vector<float> parts_buf;  // the caller's thread
  parts_buf.assign(static_cast<size_t>(chunks) * slot, 0.f);
  float* const parts = parts_buf.data();  // workers reach it through this pointer, not their own thread_local
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(g.P) * g.Q * g.K;
  const bool z = use512(g);
  const int block = z ? block512_of(g.K / 16, false) : block_of(g.KV);
  parallel_for(threads, d.n * out * g.R * g.S * g.C, chunks, [&](long long c) {
    static thread_local std::vector<float> pad_buf;
    float* part = parts + c * slot;
    for (long long n = c * kChunk; n < std::min<long long>(d.n, (c + 1) * kChunk); ++n) {
      const float* xp = padded_image(d, g, x + n * in, pad_buf);
      const float* dyn = dy + n * out;
      for (int c0 = 0; c0 < g.C; c0 += block) {
        const int nb = std::min(block, g.C - c0);
        (z ? kernel512_for<Filter512, false>(g.K / 16, nb) : kernel_for<FilterKernel>(g.KV, nb))(g, xp, dyn, c0,
                                                                                                  part);
      }
      if (!db) continue;
      for (size_t i = 0; i < out; i += g.K)
        for (int k = 0; k < g.K; ++k) part[taps + k] += dyn[i + k];
    }
  });
  // [R][S][C][K] partial sums onto KRSC dw, chunk by chunk in order.
  static thread_local std::vector<float> total;
  total.assign(slot, 0.f);
  for (long long c = 0; c < chunks; ++c)
    for (size_t i = 0; i < slot; ++i) total[i] += parts[c * slot + i];
  for (int r = 0; r < g.R; ++r)
    for (int s = 0; s < g.S; ++s)
      for (int ci = 0; ci < g.C; ++ci)
        for (int k = 0; k < g.K; ++k)
          dw[((static_cast<size_t>(k) * g.R + r) * g.S + s) * g.C + ci] +=
              total[((static_cast<size_t>(r) * g.S + s) * g.C + ci) * g.K + k];
  if (db)
    for (int k = 0; k < g.K; ++k) db[k] += total[taps + k];
}

void small_channel_conv_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx) {
  const Geo g(d);
  static thread_local std::vector<float> wt_buf;  // the caller's thread
  const float* wt = rsck_filters(g, w, wt_buf);
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(g.P) * g.Q * g.K;
  const bool z = use512(g);
  const int block = z ? block512_of(g.K / 16, false) : block_of(g.KV);
  parallel_for(threads, d.n * out * g.R * g.S * g.C, d.n, [&](long long n) {
    const float* dyn = dy + n * out;
    float* dxn = dx + n * in;
    for (int c0 = 0; c0 < g.C; c0 += block) {
      const int nb = std::min(block, g.C - c0);
      const DataFn fn = z ? kernel512_for<Data512, false>(g.K / 16, nb) : kernel_for<DataKernel>(g.KV, nb);
      const DataFn pair = z ? kernel512_for<DataPair512, false>(g.K / 16, nb) : nullptr;  // two pixels a call
      for (int ih = 0; ih < d.h; ++ih)
        for (int iw = 0; iw < d.w; iw += pair && iw + 1 < d.w ? 2 : 1)
          (pair && iw + 1 < d.w ? pair : fn)(d, g, dyn, wt, ih, iw, c0,
                                            dxn + (static_cast<size_t>(ih) * d.w + iw) * g.C + c0);
    }
  });
}

#endif

}  // namespace cnn
