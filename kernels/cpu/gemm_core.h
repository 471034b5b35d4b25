// The packed fp32 matrix product behind cnntrain's GEMM convolutions on AVX2/FMA (kernels/cpu/gemm_conv.h): its
// register-block kernels, cache blocking and the two ways gemm_core splits a product over threads. Internal to
// gemm_conv.cpp, which supplies each product's rows of A (a table of row addresses per slice of the summed index)
// and packed slivers of B; callers use gemm_conv.h. The loops over a register block's accumulators carry
// `#pragma GCC unroll` (see small_channel_conv.cpp).
#pragma once
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/base/error.h"

namespace cnn {
namespace gemm_core_detail {


constexpr int kMr = 6;     // rows of a register block (12 accumulators of 16 vector registers)
constexpr int kNr = 16;    // columns of a register block: two vectors, one packed sliver of B
constexpr long kKc = 256;  // longest slice of the sum per pass over a block: a packed sliver is 16 KB (L1)
constexpr long kMc = 144;  // rows per cache block (one table of A's row addresses per slice)
constexpr long kChunk = 8;  // column slivers per pass over a cache block's rows
constexpr long kPanelsFrom = 2;  // column slivers that make strided rows of A worth copying into panels (run_slice)
constexpr size_t kApack = kMc * kKc;  // floats of one thread's packed rows of A (run_slice)
constexpr long kPanelFloats = 32768;   // results per row panel of rows_split (128 KB, L2)
constexpr long kCopyRows = 8;  // summed indices (pixels of dy) per step of the copy of strided A (run_slice)

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
inline std::vector<Slice> slices_of(long taps, long run) {
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

[[noreturn]] inline void out_of_memory(const char* what, size_t floats) {
  raise(kExitFailure,
        "out of memory: cnntrain's CPU convolution kernels could not allocate %zu MB for %s; lower the batch size "
        "(--train.batch) or run fewer ranks per node",
        (floats * sizeof(float) + (1 << 20) - 1) >> 20, what);
}

// Row ranges in multiples of kMr, split as evenly as the blocks allow.
inline long split_at(long count, int part, int parts) {
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
// The copy takes kCopyRows summed indices at a time over all panels: their lines of A (a_cs floats apart, in
// few L1 sets) stay in L1 for all panels, and each panel gets kCopyRows * kMr floats in order. (One index at a
// time over all panels wrote 24 streams kKc * kMr floats apart; one panel at a time read each line back from L2
// once per panel: the copy took 0.55 and 0.29 of the products' time at 14x14 x 256 -> 1024, 0.23 now;
// docs/perf.md, thirteenth pass.)
template <class Fill>
void run_slice(const Product& g, Fill& fill, long i0, long i1, long s0, long s1, const Slice& sl, const float* bp,
               float* apack) {
  const bool load = g.accumulate || sl.q0 > 0;
  const float* bias = sl.q0 == 0 && !g.accumulate ? g.bias : nullptr;
  const float* table[kMc];
  const float* panels[kMc];
  const bool pack_a = apack && g.a_cs != 1 && s1 - s0 >= kPanelsFrom;
  for (long ib = i0; ib < i1; ib += kMc) {
    const long ie = std::min(i1, ib + kMc);
    fill(ib, ie - ib, sl, table);
    const float* const* rows = table;
    long a_cs = g.a_cs;
    if (pack_a) {
      const long count = ie - ib;
      bool adjacent = true;  // row ii at table[0] + ii (backward-weights: dy's channels), copied kMr at a time
      for (long ii = 1; ii < count; ++ii) adjacent = adjacent && table[ii] == table[0] + ii;
      for (long q0 = 0; q0 < sl.kc; q0 += kCopyRows) {
        const long q1 = std::min(sl.kc, q0 + kCopyRows);
        for (long b = 0; b * kMr < count; ++b) {
          float* out = apack + b * sl.kc * kMr;
          const long n = std::min<long>(kMr, count - b * kMr);
          if (adjacent && n == kMr) {
            const float* src = table[b * kMr];
            for (long q = q0; q < q1; ++q) std::memcpy(out + q * kMr, src + q * g.a_cs, kMr * sizeof(float));
          } else {
            for (long q = q0; q < q1; ++q)
              for (long r = 0; r < n; ++r) out[q * kMr + r] = table[b * kMr + r][q * g.a_cs];
          }
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
  // A thread's rows in panels of whole cache blocks whose results (kPanelFloats) stay in L2 over all the
  // slices, instead of each slice passing over all of its rows: 6.4 MB per thread for ResNet-50's 56x56 stride-2
  // 3x3 layer, read and written 9 times from L3 (docs/perf.md, twelfth pass). Each result is still one sum
  // over the slices in order: the same bits.
  const long panel_rows = std::max(kMc, kPanelFloats / (slivers * kNr) / kMc * kMc);
  auto rows = [&](int t, int nt) {
    const long i0 = split_at(g.m, t, nt), i1 = split_at(g.m, t + 1, nt);
    if (i0 >= i1) return;
    Fill f = w.fill;
    for (long r0 = i0; r0 < i1; r0 += panel_rows)
      for (size_t sl = 0; sl < slices.size(); ++sl)
        run_slice(g, f, r0, std::min(i1, r0 + panel_rows), 0, slivers, slices[sl], base[sl], w.panels(t));
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

// A long sum into a small result (a first layer's filter gradient, 64 x 147 over 400k pixels): the slices
// split into kSumParts fixed parts, each part's product into its own zeroed buffer (all columns, so B is packed
// and A copied once in all), then c = (c, or bias, or 0) + ((part 0 + part 1) + ...): the same bits for any
// thread count. Splitting columns or rows instead has each thread copy or pack all of one operand.
constexpr long kSumParts = 8;
constexpr long kSumResult = 1 << 16;  // results (m x n) at most
template <class Fill, class Pack>
void sum_split(const Work<Fill, Pack>& w) {
  const Product& g = w.g;
  const long slivers = w.slivers, parts = kSumParts, count = static_cast<long>(w.slices.size());
  const size_t part = static_cast<size_t>(g.m) * g.n;
  static thread_local AlignedFloats sums;
  float* sp = sums.get(parts * part);
  if (!sp) out_of_memory("a matrix product's partial sums", parts * part);
  std::fill(sp, sp + parts * part, 0.0f);
  std::atomic<size_t> missing{0};
  auto run_part = [&](long j, float* panels) {
    static thread_local AlignedFloats packed;
    const size_t floats = static_cast<size_t>(kKc) * slivers * kNr;
    float* bp = packed.get(floats);
    if (!bp) {
      missing = floats;
      return;
    }
    const Product gp{g.m, g.n, g.a_cs, sp + j * part, g.n, true, nullptr};
    Fill f = w.fill;
    for (long sl = count * j / parts; sl < count * (j + 1) / parts; ++sl) {
      w.pack(w.slices[sl], 0, slivers, bp);
      run_slice(gp, f, 0, g.m, 0, slivers, w.slices[sl], bp, panels);
    }
  };
  if (w.threads == 1) {
    for (long j = 0; j < parts; ++j) run_part(j, w.panels(0));
  } else {
#pragma omp parallel for num_threads(w.threads) schedule(static)
    for (long j = 0; j < parts; ++j) run_part(j, w.panels(omp_get_thread_num()));
  }
  if (missing) out_of_memory("a thread's packed matrix operand", missing);
  for (long i = 0; i < g.m; ++i)
    for (long jc = 0; jc < g.n; ++jc) {
      float total = sp[i * g.n + jc];
      for (long j = 1; j < parts; ++j) total += sp[j * part + i * g.n + jc];
      float& c = g.c[i * g.ldc + jc];
      c = (g.accumulate ? c : g.bias ? g.bias[jc] : 0.0f) + total;
    }
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
  // The choice of sum_split must not depend on the thread count (its sums are grouped differently).
  if (g.m * g.n <= kSumResult && static_cast<long>(slices.size()) >= 4 * kSumParts)
    sum_split(w);
  else if (row_blocks >= 8L * threads && whole_b <= (size_t{1} << 22))
    rows_split(w, whole_b);
  else
    parts_split(w);
}

}  // namespace gemm_core_detail
}  // namespace cnn

#endif
