// Convolutions as packed fp32 matrix products on AVX2/FMA (kernels/cpu/gemm_conv.h): what each convolution pass
// supplies to the product of kernels/cpu/gemm_core.h (its rows of A and packed slivers of B).
#include "kernels/cpu/gemm_conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/cpu/gemm_core.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_GEMM_CONV_AVX2 1
#endif

namespace cnn {

#ifndef CNN_GEMM_CONV_AVX2

bool gemm_conv_ok(const ConvDesc&) { return false; }
bool gemm_conv_filter_ok(const ConvDesc&) { return false; }
void packed_gemm(int, const GemmArgs&) {
  raise(kExitFailure, "internal: cnntrain's packed matrix products need an AVX2/FMA build");
}
void gemm_conv_forward(int, const ConvDesc&, const float*, const float*, const float*, float*) {
  raise(kExitFailure, "internal: cnntrain's GEMM convolution kernels need an AVX2/FMA build");
}
void gemm_conv_backward_data(int, const ConvDesc&, const float*, const float*, float*) {
  raise(kExitFailure, "internal: cnntrain's GEMM convolution kernels need an AVX2/FMA build");
}
void gemm_conv_backward_filter(int, const ConvDesc&, const float*, const float*, float*, float*) {
  raise(kExitFailure, "internal: cnntrain's GEMM convolution kernels need an AVX2/FMA build");
}

#else

namespace {

using namespace gemm_core_detail;

alignas(64) const float kZeros[kKc] = {};  // the row a tap on padding reads
// Longest filter (R * S * C floats) whose gradient's columns may straddle taps (gemm_conv_filter_ok; WholeRows
// keeps a table per 8 of its columns on the stack).
constexpr long kWholeRow = 1024;

// B(q, j) = b[q * rs + j * cs], packed as gemm_core's pack does.
void pack_strided(const float* b, long rs, long cs, long n, const Slice& sl, long s0, long s1, float* dst) {
  for (long s = s0; s < s1; ++s) {
    float* out = dst + (s - s0) * sl.kc * kNr;
    const long j0 = s * kNr, nv = std::min<long>(kNr, n - j0);
    if (cs == 1) {
      for (long q = 0; q < sl.kc; ++q) {
        const float* src = b + (sl.q0 + q) * rs + j0;
        float* o = out + q * kNr;
        if (nv == kNr) {
          _mm256_store_ps(o, _mm256_loadu_ps(src));
          _mm256_store_ps(o + 8, _mm256_loadu_ps(src + 8));
        } else {
          for (long j = 0; j < kNr; ++j) o[j] = j < nv ? src[j] : 0.0f;
        }
      }
    } else {
      for (long j = 0; j < kNr; ++j) {
        if (j >= nv) {
          for (long q = 0; q < sl.kc; ++q) out[q * kNr + j] = 0.0f;
          continue;
        }
        const float* src = b + (j0 + j) * cs + sl.q0 * rs;
        for (long q = 0; q < sl.kc; ++q) out[q * kNr + j] = src[q * rs];
      }
    }
  }
}

// A(i, q) = a[i * rs + q * cs].
struct StridedRows {
  const float* a;
  long rs, cs;
  void operator()(long i0, long count, const Slice& sl, const float** table) const {
    for (long ii = 0; ii < count; ++ii) table[ii] = a + (i0 + ii) * rs + sl.q0 * cs;
  }
};

// The output pixels i = (n, p, q) of `d` in order.
struct PixelWalk {
  long n, p, q;
  long P, Q;  // the output's rows and columns (ConvDesc computes them with divisions)
  PixelWalk(const ConvDesc& d, long i) : P(d.p()), Q(d.q()) { n = i / (P * Q), p = i % (P * Q) / Q, q = i % Q; }
  void next() {
    if (++q == Q) {
      q = 0;
      if (++p == P) p = 0, ++n;
    }
  }
  // x's row (C floats) under tap (r, s), or null on padding.
  const float* input(const ConvDesc& d, const float* x, long r, long s) const {
    const long ih = p * d.stride_h - d.pad_h + r, iw = q * d.stride_w - d.pad_w + s;
    if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) return nullptr;
    return x + ((n * d.h + ih) * d.w + iw) * d.c;
  }
};

// A(i, (r, s, c)) = x[pixel(i, r, s), c]: the forward product's rows.
struct ConvRows {
  const ConvDesc* d;
  const float* x;
  void operator()(long i0, long count, const Slice& sl, const float** table) const {
    const long tap = sl.q0 / d->c, c0 = sl.q0 % d->c;
    PixelWalk at(*d, i0);
    for (long ii = 0; ii < count; ++ii, at.next()) {
      const float* row = at.input(*d, x, tap / d->s, tap % d->s);
      table[ii] = row ? row + c0 : kZeros;
    }
  }
};

bool avx2_plain_nhwc(const ConvDesc& d) {
  return d.plain() && d.x_layout == ActLayout::kNHWC && d.y_layout == ActLayout::kNHWC && d.n >= 1 && d.h >= 1 &&
         d.w >= 1 && d.c >= 1 && d.k >= 1 && d.pad_h >= 0 && d.pad_w >= 0 && d.pad_h < d.r && d.pad_w < d.s &&
         d.p() >= 1 && d.q() >= 1;
}

}  // namespace

void packed_gemm(int threads, const GemmArgs& g) {
  const Product p{g.m, g.n, g.a_cs, g.c, g.ldc, g.accumulate, g.bias};
  gemm_core(threads, p, slices_of(1, g.kdim), StridedRows{g.a, g.a_rs, g.a_cs},
            [&](const Slice& sl, long s0, long s1, float* dst) {
              pack_strided(g.b, g.b_rs, g.b_cs, g.n, sl, s0, s1, dst);
            });
}

bool gemm_conv_ok(const ConvDesc& d) {
  return avx2_plain_nhwc(d) && (d.c % kNr == 0 || (d.r == 1 && d.s == 1));
}

bool gemm_conv_filter_ok(const ConvDesc& d) {
  return gemm_conv_ok(d) || (avx2_plain_nhwc(d) && static_cast<long>(d.s) * d.c >= 8 &&
                             static_cast<long>(d.r) * d.s * d.c <= kWholeRow);
}

void gemm_conv_forward(int threads, const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  CNN_CHECK(avx2_plain_nhwc(d), "internal: gemm_conv_forward on a %dx%d convolution it does not take", d.r, d.s);
  const long rsc = static_cast<long>(d.r) * d.s * d.c;
  const Product p{static_cast<long>(d.n) * d.p() * d.q(), d.k, 1, y, d.k, false, b};
  gemm_core(threads, p, slices_of(static_cast<long>(d.r) * d.s, d.c), ConvRows{&d, x},
            [&](const Slice& sl, long s0, long s1, float* dst) { pack_strided(w, 1, rsc, d.k, sl, s0, s1, dst); });
}

void gemm_conv_backward_data(int threads, const ConvDesc& d, const float* dy, const float* w, float* dx) {
  CNN_CHECK(avx2_plain_nhwc(d), "internal: gemm_conv_backward_data on a %dx%d convolution it does not take", d.r,
            d.s);
  // Input pixel (ih, iw) receives tap (r, s) of output pixel ((ih + pad_h - r) / stride_h, ...) when the division
  // is exact: the pixels of one class of (ih + pad_h) mod stride_h and (iw + pad_w) mod stride_w take the same
  // taps, so each class is one product over those taps and the output channels, written compactly and then
  // scattered into dx.
  const long sh = d.stride_h, sw = d.stride_w, P = d.p(), Q = d.q(), K = d.k, C = d.c;
  const long rsc = static_cast<long>(d.r) * d.s * C;
  // With stride 1 the one class is all of dx, in dx's order: written in place.
  const bool in_place = sh == 1 && sw == 1;
  static thread_local AlignedFloats compact;
  const size_t compact_floats = static_cast<size_t>(d.n) * d.h * d.w * C;
  float* out = in_place ? dx : compact.get(compact_floats);
  if (!out) out_of_memory("backward-data's per-class results", compact_floats);
  struct Class {
    long ih0, iw0, rows, cols;  // first input row and column, how many of each
    float* at;                   // its rows in `out`
  };
  std::vector<Class> classes;
  long used = 0;
  for (long a = 0; a < sh; ++a)
    for (long b = 0; b < sw; ++b) {
      Class k;
      k.ih0 = ((a - d.pad_h) % sh + sh) % sh, k.iw0 = ((b - d.pad_w) % sw + sw) % sw;
      k.rows = k.ih0 < d.h ? (d.h - k.ih0 + sh - 1) / sh : 0;
      k.cols = k.iw0 < d.w ? (d.w - k.iw0 + sw - 1) / sw : 0;
      k.at = out + used;
      used += d.n * k.rows * k.cols * C;
      if (k.rows == 0 || k.cols == 0) continue;
      std::vector<std::pair<long, long>> taps;
      for (long r = a; r < d.r; r += sh)
        for (long s = b; s < d.s; s += sw) taps.push_back({r, s});
      const Product p{d.n * k.rows * k.cols, C, 1, k.at, C, false, nullptr};
      gemm_core(threads, p, slices_of(static_cast<long>(taps.size()), K),
                [&](long i0, long count, const Slice& sl, const float** table) {
                  const long tap = sl.q0 / K, k0 = sl.q0 % K, r = taps[tap].first, s = taps[tap].second;
                  long n = i0 / (k.rows * k.cols), y = i0 / k.cols % k.rows, x = i0 % k.cols;
                  for (long ii = 0; ii < count; ++ii) {
                    // (ih + pad_h - r) is a multiple of sh by the class's choice of taps.
                    const long oh = (k.ih0 + y * sh + d.pad_h - r) / sh, ow = (k.iw0 + x * sw + d.pad_w - s) / sw;
                    const bool in = k.ih0 + y * sh + d.pad_h - r >= 0 && oh < P && k.iw0 + x * sw + d.pad_w - s >= 0 &&
                                    ow < Q;
                    table[ii] = in ? dy + ((n * P + oh) * Q + ow) * K + k0 : kZeros;
                    if (++x == k.cols) {
                      x = 0;
                      if (++y == k.rows) y = 0, ++n;
                    }
                  }
                },
                [&](const Slice& sl, long s0, long s1, float* dst) {
                  const long tap = sl.q0 / K, r = taps[tap].first, s = taps[tap].second;
                  pack_strided(w + (r * d.s + s) * C, rsc, 1, C, Slice{sl.q0 % K, sl.kc}, s0, s1, dst);
                });
      classes.push_back(k);
    }
  // Every input pixel is in one class (a class without taps, stride larger than the filter, got zeros).
  if (in_place) return;
  for (const Class& k : classes) {
    const long rows = d.n * k.rows;
    parallel_for(threads, static_cast<size_t>(rows) * k.cols * C, rows, [&](long long q) {
      const long n = q / k.rows, y = q % k.rows;
      for (long x = 0; x < k.cols; ++x)
        std::memcpy(dx + ((n * d.h + k.ih0 + y * sh) * d.w + k.iw0 + x * sw) * C, k.at + (q * k.cols + x) * C,
                    C * sizeof(float));
    });
  }
}

namespace {

// Backward-weights' B when each 16-column sliver lies in one tap (C % 16 == 0, or 1x1 taps): sliver s copies
// channels chan[s].. of x under tap (tap_r[s], tap_s[s]) for each pixel of the slice.
struct TapSlivers {
  const ConvDesc& d;
  const float* x;
  std::vector<long> tap_r, tap_s, chan;
  TapSlivers(const ConvDesc& dd, const float* xx, long slivers)
      : d(dd), x(xx), tap_r(slivers), tap_s(slivers), chan(slivers) {
    for (long s = 0; s < slivers; ++s) {
      const long t = s * kNr / d.c;
      tap_r[s] = t / d.s, tap_s[s] = t % d.s, chan[s] = s * kNr % d.c;
    }
  }
  void operator()(const Slice& sl, long s0, long s1, float* dst) const {
    PixelWalk at(d, sl.q0);
    for (long q = 0; q < sl.kc; ++q, at.next())
      for (long s = s0; s < s1; ++s) {
        float* o = dst + ((s - s0) * sl.kc + q) * kNr;
        const float* row = at.input(d, x, tap_r[s], tap_s[s]);
        const long nv = std::min<long>(kNr, d.c - chan[s]);
        if (row && nv == kNr) {
          _mm256_store_ps(o, _mm256_loadu_ps(row + chan[s]));
          _mm256_store_ps(o + 8, _mm256_loadu_ps(row + chan[s] + 8));
        } else {
          for (long j = 0; j < kNr; ++j) o[j] = row && j < nv ? row[chan[s] + j] : 0.0f;
        }
      }
  }
};

// Backward-weights' B when slivers straddle taps (few channels: an RGB first layer's 7x7x3 = 147 columns, (r, s,
// c) in order). Filter row r of a pixel's columns is S * C floats adjacent in x, so each 8-column half of a
// sliver is one or two masked loads (S * C >= 8) from the filter rows it covers, where no tap of the pixel falls
// on padding; the pixels next to the map's left and right edges are copied column by column.
struct WholeRows {
  const ConvDesc& d;
  const float* x;
  struct Half {
    long r, off;          // first filter row and the half's first column within it
    __m256i first, next;  // lanes in row r, in row r + 1 (none past the filter's last column)
    int in_r, in_next;    // how many
  };
  void operator()(const Slice& sl, long s0, long s1, float* dst) const {
    const long sc = static_cast<long>(d.s) * d.c, rsc = d.r * sc, halves = 2 * (s1 - s0);
    Half hv[2 * (kWholeRow / kNr)];  // halves of at most kWholeRow / kNr slivers
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (long h = 0; h < halves; ++h) {
      const long j0 = (2 * s0 + h) * 8, r = j0 / sc;
      const long in_r = std::min(8L, std::max(0L, std::min((r + 1) * sc, rsc) - j0));  // lanes in row r
      const long in_next = std::max(0L, std::min(8L, rsc - j0) - in_r);
      hv[h].r = r, hv[h].off = j0 - r * sc, hv[h].in_r = static_cast<int>(in_r), hv[h].in_next = static_cast<int>(in_next);
      hv[h].first = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(in_r)), lanes);
      hv[h].next = _mm256_andnot_si256(hv[h].first, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(in_r + in_next)), lanes));
    }
    // Sliver by sliver, so that the stores run along one sliver's rows (those of one pixel are 16 KB apart).
    const long H = d.h, W = d.w, row = W * d.c;
    for (long sv = s0; sv < s1; ++sv) {
      PixelWalk at(d, sl.q0);
      float* out = dst + (sv - s0) * sl.kc * kNr;
      for (long q = 0; q < sl.kc; ++q, out += kNr) {
        const long ih0 = at.p * d.stride_h - d.pad_h, iw0 = at.q * d.stride_w - d.pad_w;
        if (iw0 < 0 || iw0 + d.s > W) {
          edge(at, ih0, iw0, sv, sv + 1, sl.kc, out);
        } else {
          const float* base = x + ((at.n * H + ih0) * W + iw0) * d.c;
          for (long h = 0; h < 2; ++h) {
            const Half& e = hv[2 * (sv - s0) + h];
            // Masked-off lanes read nothing: the addresses before a row's start or past its end are not
            // touched. (Masked loads are slow on AMD's cores, even with no lane on: a half in one row is a load.)
            __m256 v = _mm256_setzero_ps();
            const long ih = ih0 + e.r;
            const float* at_r = base + e.r * row + e.off;
            if (e.in_r == 8 && ih >= 0 && ih < H)
              v = _mm256_loadu_ps(at_r);
            else if (e.in_r > 0 && ih >= 0 && ih < H)
              v = _mm256_maskload_ps(at_r, e.first);
            if (e.in_next > 0 && ih + 1 >= 0 && ih + 1 < H)
              v = _mm256_or_ps(v, _mm256_maskload_ps(at_r + row - sc, e.next));
            _mm256_store_ps(out + h * 8, v);
          }
        }
        at.next();
      }
    }
  }
  // One pixel's columns of slivers [s0, s1) one by one, zeros on padding and past the filter's last column.
  void edge(const PixelWalk& at, long ih0, long iw0, long s0, long s1, long kc, float* out) const {
    long r = s0 * kNr / (static_cast<long>(d.s) * d.c), s = s0 * kNr / d.c % d.s, c = s0 * kNr % d.c;
    for (long j = 0; j < (s1 - s0) * kNr; ++j) {
      const long ih = ih0 + r, iw = iw0 + s;
      const bool in = r < d.r && ih >= 0 && ih < d.h && iw >= 0 && iw < d.w;
      out[(j / kNr) * kc * kNr + j % kNr] = in ? x[((at.n * d.h + ih) * d.w + iw) * d.c + c] : 0.0f;
      if (++c == d.c) {
        c = 0;
        if (++s == d.s) s = 0, ++r;
      }
    }
  }
};

}  // namespace

void gemm_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                               float* db) {
  CNN_CHECK(gemm_conv_filter_ok(d), "internal: gemm_conv_backward_filter on a %dx%d convolution it does not take",
            d.r, d.s);
  const long pixels = static_cast<long>(d.n) * d.p() * d.q(), rsc = static_cast<long>(d.r) * d.s * d.c;
  const Product p{d.k, rsc, d.k, dw, rsc, true, nullptr};
  if (gemm_conv_ok(d))
    gemm_core(threads, p, slices_of(1, pixels), StridedRows{dy, 1, d.k}, TapSlivers(d, x, (rsc + kNr - 1) / kNr));
  else
    gemm_core(threads, p, slices_of(1, pixels), StridedRows{dy, 1, d.k}, WholeRows{d, x});
  if (!db) return;
  for (long i = 0; i < pixels; ++i)
    for (int k = 0; k < d.k; ++k) db[k] += dy[i * d.k + k];
}

#endif

}  // namespace cnn
