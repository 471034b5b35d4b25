// Convolutions as packed fp32 matrix products on AVX2/FMA (kernels/cpu/gemm_conv.h).
// The loops over a register block's accumulators carry `#pragma GCC unroll` (see small_channel_conv.cpp).
#include "kernels/cpu/gemm_conv.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_parallel.h"
#include "src/base/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CNN_GEMM_CONV_AVX2 1
#endif

namespace cnn {

#ifndef CNN_GEMM_CONV_AVX2

bool gemm_conv_ok(const ConvDesc&) { return false; }
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

constexpr int kMr = 6;     // rows of a register block (12 accumulators of 16 vector registers)
constexpr int kNr = 16;    // columns of a register block: two vectors, one packed sliver of B
constexpr long kKc = 256;  // longest slice of the sum per pass over a block: a packed sliver is 16 KB (L1)
constexpr long kMc = 144;  // rows per cache block (one table of A's row addresses per slice)
constexpr long kChunk = 8;  // column slivers per pass over a cache block's rows
constexpr size_t kApack = kMc * kKc;  // floats of one thread's packed rows of A (run_slice)

alignas(64) const float kZeros[kKc] = {};  // the row a tap on padding reads

// c[0..MR)[0..16) = (load ? c : bias or 0) + sum over q < kc of ap[i][q * a_cs] * bp[q][0..16).
// nv < 16 columns go through a local tile.
template <int MR>
void block(long kc, const float* const* ap, long a_cs, const float* bp, float* c, long ldc, int nv, bool load,
           const float* bias, const float* next) {
  __m256 acc[MR][2];
  float tile[MR * kNr];
  float* out = c;
  long ld = ldc;
  if (nv < kNr) {
    out = tile, ld = kNr;
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < kNr; ++j) tile[i * kNr + j] = j < nv && load ? c[i * ldc + j] : 0.0f;
  }
  if (load) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm256_loadu_ps(out + i * ld);
      acc[i][1] = _mm256_loadu_ps(out + i * ld + 8);
    }
  } else {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (bias) {
      float bb[kNr] = {};
      for (int j = 0; j < nv; ++j) bb[j] = bias[j];
      b0 = _mm256_loadu_ps(bb), b1 = _mm256_loadu_ps(bb + 8);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) acc[i][0] = b0, acc[i][1] = b1;
  }
  const float* p[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    p[i] = ap[i];
    // The result's lines are usually written for the first time: ask for the next block's now.
    _mm_prefetch(reinterpret_cast<const char*>(next + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next + i * ldc + kNr - 1), _MM_HINT_T0);
  }
  if (a_cs == 1) {
    for (long q = 0; q < kc; ++q) {
      const __m256 b0 = _mm256_load_ps(bp + q * kNr), b1 = _mm256_load_ps(bp + q * kNr + 8);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m256 v = _mm256_broadcast_ss(p[i] + q);
        acc[i][0] = _mm256_fmadd_ps(v, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(v, b1, acc[i][1]);
      }
    }
  } else {
    for (long q = 0; q < kc; ++q) {
      const __m256 b0 = _mm256_load_ps(bp + q * kNr), b1 = _mm256_load_ps(bp + q * kNr + 8);
      const long o = q * a_cs;
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m256 v = _mm256_broadcast_ss(p[i] + o);
        acc[i][0] = _mm256_fmadd_ps(v, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(v, b1, acc[i][1]);
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(out + i * ld, acc[i][0]);
    _mm256_storeu_ps(out + i * ld + 8, acc[i][1]);
  }
  if (nv < kNr)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < nv; ++j) c[i * ldc + j] = tile[i * kNr + j];
}

using BlockFn = void (*)(long, const float* const*, long, const float*, float*, long, int, bool, const float*,
                        const float*);
constexpr BlockFn kBlocks[kMr + 1] = {nullptr, block<1>, block<2>, block<3>, block<4>, block<5>, block<6>};

// A slice of the summed index: [q0, q0 + kc), within one tap.
struct Slice {
  long q0, kc;
};

// Slices of at most kKc over `taps` runs of `run` summed indices each.
std::vector<Slice> slices_of(long taps, long run) {
  std::vector<Slice> v;
  for (long t = 0; t < taps; ++t)
    for (long c0 = 0; c0 < run; c0 += kKc) v.push_back({t * run + c0, std::min(kKc, run - c0)});
  return v;
}

// A buffer kept for the thread's life, grown on demand; null when the memory is not there (the callers raise
// outside their OpenMP regions, where an exception may not cross).
struct AlignedFloats {
  float* p = nullptr;
  size_t size = 0;
  float* get(size_t n) {
    if (n > size) {
      std::free(p);
      p = static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64));
      size = p ? n : 0;
    }
    return p;
  }
  ~AlignedFloats() { std::free(p); }
};

[[noreturn]] void out_of_memory(const char* what, size_t floats) {
  raise(kExitFailure,
        "out of memory: cnntrain's CPU convolution kernels could not allocate %zu MB for %s; lower the batch size "
        "(--train.batch) or run fewer ranks per node",
        (floats * sizeof(float) + (1 << 20) - 1) >> 20, what);
}

// Row ranges in multiples of kMr, split as evenly as the blocks allow.
long split_at(long count, int part, int parts) {
  const long blocks = (count + kMr - 1) / kMr;
  return std::min(count, blocks * part / parts * kMr);
}

// The product's shape and result; A comes through fill(i0, count, slice, table) (table[ii] = the address of
// A(i0 + ii, slice.q0), A(i, q0 + q) at table[ii][q * a_cs]), B through pack(slice, s0, s1, dst) (sliver s of
// the slice's rows at dst + (s - s0) * kc * 16, its row q at + q * 16, columns past n zero).
struct Product {
  long m, n;
  long a_cs;
  float* c;
  long ldc;
  bool accumulate;
  const float* bias;
};

// Rows of A read with a stride (a_cs > 1: backward-weights reads dy's channels across pixels, K floats apart)
// touch one cache line per element, and at power-of-two strides of 1-4 KB all of a row's lines fall into the
// same few L1 sets: before the products, such a cache block's rows are copied into panels of kMr rows,
// element (q, ii) of a panel at q * kMr + ii, when enough column slivers reuse them (kMc * kKc floats at apack).
template <class Fill>
void run_slice(const Product& g, Fill& fill, long i0, long i1, long s0, long s1, const Slice& sl, const float* bp,
               float* apack) {
  const bool load = g.accumulate || sl.q0 > 0;
  const float* bias = sl.q0 == 0 && !g.accumulate ? g.bias : nullptr;
  const float* table[kMc];
  const float* panels[kMc];
  const bool pack_a = apack && g.a_cs != 1 && s1 - s0 >= kChunk;
  for (long ib = i0; ib < i1; ib += kMc) {
    const long ie = std::min(i1, ib + kMc);
    fill(ib, ie - ib, sl, table);
    const float* const* rows = table;
    long a_cs = g.a_cs;
    if (pack_a) {
      const long count = ie - ib;
      for (long q = 0; q < sl.kc; ++q) {
        const long o = q * g.a_cs;
        for (long b = 0; b * kMr < count; ++b) {
          float* out = apack + (b * sl.kc + q) * kMr;
          const long n = std::min<long>(kMr, count - b * kMr);
          for (long r = 0; r < n; ++r) out[r] = table[b * kMr + r][o];
        }
      }
      for (long ii = 0; ii < count; ++ii) panels[ii] = apack + (ii / kMr) * sl.kc * kMr + ii % kMr;
      rows = panels;
      a_cs = kMr;
    }
    // Chunks of kChunk slivers (B: 128 KB at the longest slice, L2); each register block's rows of A stay in L1
    // over the chunk, and consecutive blocks write adjacent columns of the same rows.
    for (long sc = s0; sc < s1; sc += kChunk) {
      const long se = std::min(s1, sc + kChunk);
      for (long i = ib; i < ie; i += kMr) {
        const int mr = static_cast<int>(std::min<long>(kMr, ie - i));
        for (long s = sc; s < se; ++s) {
          const long j0 = s * kNr;
          const int nv = static_cast<int>(std::min<long>(kNr, g.n - j0));
          const float* b = bp + (s - s0) * sl.kc * kNr;
          float* c = g.c + i * g.ldc + j0;
          const float* next = s + 1 < se ? c + kNr : i + 2 * kMr <= ie ? g.c + (i + kMr) * g.ldc + sc * kNr : c;
          kBlocks[mr](sl.kc, rows + (i - ib), a_cs, b, c, g.ldc, nv, load, bias ? bias + j0 : nullptr, next);
        }
      }
    }
  }
}

// One product's work as gemm_core splits it: its threads, the column slivers of B and each thread's panels of
// strided rows of A (allocated before the OpenMP regions; null when A's rows are contiguous).
template <class Fill, class Pack>
struct Work {
  int threads;
  const Product& g;
  const std::vector<Slice>& slices;
  Fill& fill;
  Pack& pack;
  long slivers;
  float* apack;
  float* panels(int t) const { return apack ? apack + static_cast<size_t>(t) * kApack : nullptr; }
};

// Many rows (forward and backward-data over the pixels, backward-weights over few pixels): B (whole_b floats)
// packed once, slivers in parallel, then each thread takes a range of rows.
template <class Fill, class Pack>
void rows_split(const Work<Fill, Pack>& w, size_t whole_b) {
  const Product& g = w.g;
  const std::vector<Slice>& slices = w.slices;
  const long slivers = w.slivers;
  static thread_local AlignedFloats packed;
  float* bp = packed.get(whole_b);
  if (!bp) out_of_memory("a packed matrix operand", whole_b);
  std::vector<float*> base(slices.size());
  for (size_t sl = 0, off = 0; sl < slices.size(); off += slices[sl].kc * slivers * kNr, ++sl) base[sl] = bp + off;
  const long units = static_cast<long>(slices.size()) * slivers;
  auto pack_part = [&](int t, int nt) {
    for (long u = t; u < units; u += nt) {
      const long sl = u / slivers, s = u % slivers;
      w.pack(slices[sl], s, s + 1, base[sl] + s * slices[sl].kc * kNr);
    }
  };
  auto rows = [&](int t, int nt) {
    const long i0 = split_at(g.m, t, nt), i1 = split_at(g.m, t + 1, nt);
    if (i0 >= i1) return;
    Fill f = w.fill;
    for (size_t sl = 0; sl < slices.size(); ++sl)
      run_slice(g, f, i0, i1, 0, slivers, slices[sl], base[sl], w.panels(t));
  };
  if (w.threads == 1) {
    pack_part(0, 1);
    rows(0, 1);
    return;
  }
#pragma omp parallel num_threads(w.threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    pack_part(t, nt);
#pragma omp barrier
    rows(t, nt);
  }
}

// A long sum (backward-weights over many pixels) or a large B: each thread packs its own slivers of each slice
// and owns a part of the result, split over column slivers when they divide well, else over rows.
template <class Fill, class Pack>
void parts_split(const Work<Fill, Pack>& w) {
  const Product& g = w.g;
  const long slivers = w.slivers;
  const bool by_columns = slivers % w.threads == 0 || slivers >= 4L * w.threads;
  std::atomic<size_t> missing{0};  // floats a thread asked for and did not get
  auto part = [&](int t, int nt) {
    static thread_local AlignedFloats packed;
    long i0 = 0, i1 = g.m, s0 = 0, s1 = slivers;
    if (by_columns) {
      s0 = slivers * t / nt, s1 = slivers * (t + 1) / nt;
    } else {
      i0 = split_at(g.m, t, nt), i1 = split_at(g.m, t + 1, nt);
    }
    if (i0 >= i1 || s0 >= s1) return;
    const size_t floats = static_cast<size_t>(kKc) * (s1 - s0) * kNr;
    float* bp = packed.get(floats);
    if (!bp) {
      missing = floats;
      return;
    }
    Fill f = w.fill;
    for (const Slice& sl : w.slices) {
      w.pack(sl, s0, s1, bp);
      run_slice(g, f, i0, i1, s0, s1, sl, bp, w.panels(t));
    }
  };
  if (w.threads == 1) {
    part(0, 1);
  } else {
#pragma omp parallel num_threads(w.threads)
    part(omp_get_thread_num(), omp_get_num_threads());
  }
  // The result is incomplete: nothing may use it.
  if (missing) out_of_memory("a thread's packed matrix operand", missing);
}

template <class Fill, class Pack>
void gemm_core(int threads, const Product& g, const std::vector<Slice>& slices, Fill fill, Pack pack) {
  if (g.m <= 0 || g.n <= 0) return;
  long kdim = 0;
  for (const Slice& s : slices) kdim += s.kc;
  if (kdim == 0) {
    for (long i = 0; i < g.m; ++i)
      for (long j = 0; j < g.n; ++j)
        g.c[i * g.ldc + j] = g.accumulate ? g.c[i * g.ldc + j] : g.bias ? g.bias[j] : 0.0f;
    return;
  }
  const long slivers = (g.n + kNr - 1) / kNr;
  if (2.0 * g.m * g.n * kdim < 4e6) threads = 1;
  threads = std::max(1, threads);
  // Each thread's panels of strided rows of A (run_slice), allocated here: not inside the OpenMP regions.
  float* apack = nullptr;
  if (g.a_cs != 1) {
    static thread_local AlignedFloats panels;
    apack = panels.get(static_cast<size_t>(threads) * kApack);
    if (!apack) out_of_memory("panels of a matrix product's rows", static_cast<size_t>(threads) * kApack);
  }
  const Work<Fill, Pack> w{threads, g, slices, fill, pack, slivers, apack};
  const long row_blocks = (g.m + kMr - 1) / kMr;
  const size_t whole_b = static_cast<size_t>(kdim) * slivers * kNr;
  if (row_blocks >= 8L * threads && whole_b <= (size_t{1} << 22))
    rows_split(w, whole_b);
  else
    parts_split(w);
}

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
  PixelWalk(const ConvDesc& d, long i) {
    const long pq = static_cast<long>(d.p()) * d.q();
    n = i / pq, p = i % pq / d.q(), q = i % d.q();
  }
  void next(const ConvDesc& d) {
    if (++q == d.q()) {
      q = 0;
      if (++p == d.p()) p = 0, ++n;
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
    for (long ii = 0; ii < count; ++ii, at.next(*d)) {
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
  static thread_local AlignedFloats compact;
  const size_t compact_floats = static_cast<size_t>(d.n) * d.h * d.w * C;
  float* out = compact.get(compact_floats);
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

void gemm_conv_backward_filter(int threads, const ConvDesc& d, const float* x, const float* dy, float* dw,
                               float* db) {
  CNN_CHECK(gemm_conv_ok(d), "internal: gemm_conv_backward_filter on a %dx%d convolution it does not take", d.r,
            d.s);
  const long pixels = static_cast<long>(d.n) * d.p() * d.q(), rsc = static_cast<long>(d.r) * d.s * d.c;
  // Each packed sliver's 16 columns lie in one tap (C % 16 == 0, or 1x1 taps): its tap and first channel.
  const long slivers = (rsc + kNr - 1) / kNr;
  std::vector<long> tap_r(slivers), tap_s(slivers), chan(slivers);
  for (long s = 0; s < slivers; ++s) {
    const long t = s * kNr / d.c;
    tap_r[s] = t / d.s, tap_s[s] = t % d.s, chan[s] = s * kNr % d.c;
  }
  const Product p{d.k, rsc, d.k, dw, rsc, true, nullptr};
  gemm_core(threads, p, slices_of(1, pixels), StridedRows{dy, 1, d.k},
            [&](const Slice& sl, long s0, long s1, float* dst) {
              PixelWalk at(d, sl.q0);
              for (long q = 0; q < sl.kc; ++q, at.next(d))
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
            });
  if (!db) return;
  for (long i = 0; i < pixels; ++i)
    for (int k = 0; k < d.k; ++k) db[k] += dy[i * d.k + k];
}

#endif

}  // namespace cnn
