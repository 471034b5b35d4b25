// AVX-512 tile work of the Winograd F(4x4, 3x3) kernels at 16, 32 and 64 channels (kernels/cpu/winograd16_avx512.h).
// The file is compiled for x86-64-v3 like the rest of the program; only the functions marked CNN_AVX512 (a target
// attribute) contain AVX-512 instructions, and they run only where avx512_kernels_enabled() says so. Inline and
// template code they call is instantiated for the file's own target and inlined into them, so no AVX-512 copy of
// shared code can stand in for the x86-64-v3 one elsewhere (which -mavx512f on the whole file would risk).
// The transforms are the AVX2 code's (winograd16_conv.cpp), operation for operation.
#include "kernels/cpu/winograd16_avx512.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CNN_WINO16_AVX512 1
#define CNN_AVX512 __attribute__((target("avx512f")))
#endif

namespace cnn {

#ifndef CNN_WINO16_AVX512

bool avx512_kernels_enabled() { return false; }
bool wino16_avx512_takes(int) { return false; }
void wino16_avx512_tiles(int, int, int, const float*, const float*, const float*, bool, long long, long long, float*) {
  raise(kExitFailure, "internal: the AVX-512 Winograd kernels need an x86-64 GCC build");
}
void wino16_avx512_filter_chunk(int, int, int, const float*, const float*, int, int, float*) {
  raise(kExitFailure, "internal: the AVX-512 Winograd kernels need an x86-64 GCC build");
}

#else

namespace {

constexpr int kE = 36;  // elements of a 6x6 input tile (4x4 outputs)
constexpr int kT = 8;   // forward tiles per block (8 sums in registers over a panel's products)
// Backward-weights tiles per group: each group reads and writes the 36 C x C sums once (winograd16_conv.cpp).
constexpr int group_of(int c) { return c == 16 ? 8 : 16; }
// Floats between tile elements in the buffers: a line more than the tiles' data (L1 sets, as there).
constexpr int fwd_step(int c) { return kT * c + 16; }
constexpr int filter_step(int c) { return group_of(c) * c + 16; }
constexpr int kMaxC = 64;

struct Geo {
  int h, w, th, tw;
  long long per;  // tiles per image
  size_t image;   // floats per image
  Geo(int h_, int w_, int c)
      : h(h_), w(w_), th((h_ + 3) / 4), tw((w_ + 3) / 4), per(static_cast<long long>(th) * tw),
        image(static_cast<size_t>(h_) * w_ * c) {}
  void tile(long long t, int* n, int* i, int* j) const {
    const long long in = t % per;
    *n = static_cast<int>(t / per), *i = static_cast<int>(in / tw), *j = static_cast<int>(in % tw);
  }
};

CNN_AVX512 inline __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
CNN_AVX512 inline __m512 sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
CNN_AVX512 inline __m512 mul(float k, __m512 a) { return _mm512_mul_ps(_mm512_set1_ps(k), a); }
CNN_AVX512 inline __m512 fma(float k, __m512 a, __m512 b) { return _mm512_fmadd_ps(_mm512_set1_ps(k), a, b); }

// B^T applied to six vectors (winograd16_conv.cpp's bt6).
CNN_AVX512 inline void bt6(const __m512 d[6], __m512 t[6]) {
  const __m512 a = fma(-4.f, d[2], d[4]), b = fma(-4.f, d[1], d[3]);
  const __m512 c = sub(d[4], d[2]), e = mul(2.f, sub(d[3], d[1]));
  t[0] = fma(4.f, d[0], fma(-5.f, d[2], d[4]));
  t[1] = add(a, b);
  t[2] = sub(a, b);
  t[3] = add(c, e);
  t[4] = sub(c, e);
  t[5] = fma(4.f, d[1], fma(-5.f, d[3], d[5]));
}

// A^T applied to six vectors (at6 there).
CNN_AVX512 inline void at6(const __m512 m[6], __m512 y[4]) {
  const __m512 p = add(m[1], m[2]), q = sub(m[1], m[2]), r = add(m[3], m[4]), s = sub(m[3], m[4]);
  y[0] = add(add(m[0], p), r);
  y[1] = fma(2.f, s, q);
  y[2] = fma(4.f, r, p);
  y[3] = add(fma(8.f, s, q), m[5]);
}

// A applied to four vectors (a4 there).
CNN_AVX512 inline void a4(const __m512 m[4], __m512 t[6]) {
  const __m512 p = add(m[0], m[2]), q = add(m[1], m[3]), r = fma(4.f, m[2], m[0]), s = fma(8.f, m[3], mul(2.f, m[1]));
  t[0] = m[0];
  t[1] = add(p, q);
  t[2] = sub(p, q);
  t[3] = add(r, s);
  t[4] = sub(r, s);
  t[5] = m[3];
}

// B^T d B of tile (i, j) of `image`: rows 4i - 1 .. 4i + 4, columns 4j - 1 .. 4j + 4, zero outside the image
// (masked loads; a masked-off load reads a pixel inside the image and drops it), 16 channels at a time, into
// v[e * step + channel].
template <int C>
CNN_AVX512 void input_tile(const Geo& g, const float* image, int i, int j, float* v, int step) {
  __mmask16 rk[6], ck[6];
  const float* rows[6];
  int cols[6];
  for (int k = 0; k < 6; ++k) {
    const int y = 4 * i - 1 + k, x = 4 * j - 1 + k;
    const bool yin = y >= 0 && y < g.h, xin = x >= 0 && x < g.w;
    rk[k] = yin ? 0xFFFF : 0;
    ck[k] = xin ? 0xFFFF : 0;
    rows[k] = image + static_cast<size_t>(yin ? y : 0) * g.w * C;
    cols[k] = (xin ? x : 0) * C;
  }
  for (int ch = 0; ch < C; ch += 16) {
    __m512 t[6][6];  // B^T d, column by column
    for (int c = 0; c < 6; ++c) {
      __m512 d[6], col[6];
#pragma GCC unroll 6
      for (int r = 0; r < 6; ++r) d[r] = _mm512_maskz_loadu_ps(rk[r] & ck[c], rows[r] + cols[c] + ch);
      bt6(d, col);
#pragma GCC unroll 6
      for (int a = 0; a < 6; ++a) t[a][c] = col[a];
    }
    for (int a = 0; a < 6; ++a) {
      __m512 out[6];
      bt6(t[a], out);
#pragma GCC unroll 6
      for (int b = 0; b < 6; ++b) _mm512_storeu_ps(v + (6 * a + b) * step + ch, out[b]);
    }
  }
}

// One tile element: m[t * kE * C + co] = sum over ci of v[t * C + ci] * u[panel_at(ci, co)] for the block's kT
// tiles, 16 output channels (one panel of u, winograd16_conv.cpp) at a time, ci in order (tiles past the block's
// end compute on stale values nobody reads).
template <int C>
CNN_AVX512 void products(const float* u, const float* v, float* m) {
  for (int cb = 0; cb < C; cb += 16) {
    __m512 acc[kT];
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
    const float* up = u + cb * C;
#pragma GCC unroll 4
    for (int ci = 0; ci < C; ++ci) {
      const __m512 ur = _mm512_loadu_ps(up + ci * 16);
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(v[t * C + ci]), ur, acc[t]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < kT; ++t) _mm512_storeu_ps(m + t * kE * C + cb, acc[t]);
  }
}

// A^T M A + bias of one tile (m[e * C + channel]), stored where inside the output image (added to what is there:
// `add_to`).
template <int C>
CNN_AVX512 void output_tile(const Geo& g, const float* m, const float* bias, bool add_to, float* image, int oy,
                            int ox) {
  for (int ch = 0; ch < C; ch += 16) {
    __m512 s[4][6];  // A^T M, column by column
    for (int c = 0; c < 6; ++c) {
      __m512 col[6], out[4];
#pragma GCC unroll 6
      for (int a = 0; a < 6; ++a) col[a] = _mm512_loadu_ps(m + (6 * a + c) * C + ch);
      at6(col, out);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) s[r][c] = out[r];
    }
    const __m512 b = _mm512_loadu_ps(bias + ch);
    for (int r = 0; r < 4 && oy + r < g.h; ++r) {
      __m512 out[4];
      at6(s[r], out);
      float* row = image + (static_cast<size_t>(oy + r) * g.w + ox) * C + ch;
      for (int k = 0; k < 4 && ox + k < g.w; ++k) {
        const __m512 v = add(out[k], b);
        _mm512_storeu_ps(row + k * C, add_to ? add(v, _mm512_loadu_ps(row + k * C)) : v);
      }
    }
  }
}

// One thread's buffers, allocated at its first call for the widest C, 64-byte aligned.
struct Buffers {
  float *v = nullptr, *m = nullptr, *y = nullptr;  // [e][tile][ci], [tile][e][co], [e][tile][co]
  ~Buffers() {
    std::free(v);
    std::free(m);
    std::free(y);
  }
  static float* zeroed(size_t floats) {
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) raise(kExitFailure, "out of memory: %zu bytes of Winograd buffers for a CPU thread", bytes);
    return static_cast<float*>(std::memset(p, 0, bytes));
  }
  void ensure() {  // each buffer on its own, so that a failed allocation leaves no half-made set behind
    const size_t vs = static_cast<size_t>(kE) * filter_step(kMaxC);  // >= fwd_step
    if (!v) v = zeroed(vs);
    if (!y) y = zeroed(vs);
    if (!m) m = zeroed(static_cast<size_t>(kT) * kE * kMaxC);
  }
};
thread_local Buffers tls_buffers;

template <int C>
CNN_AVX512 void tiles(const Geo& g, const float* x, const float* u, const float* bias, bool add, long long t0,
                      long long t1, float* y) {
  tls_buffers.ensure();
  float* v = tls_buffers.v;
  float* m = tls_buffers.m;
  constexpr int step = fwd_step(C);
  for (long long tb = t0; tb < t1; tb += kT) {
    const int T = static_cast<int>(t1 - tb < kT ? t1 - tb : kT);
    for (int t = 0; t < T; ++t) {
      int n, i, j;
      g.tile(tb + t, &n, &i, &j);
      input_tile<C>(g, x + n * g.image, i, j, v + t * C, step);
    }
    for (int e = 0; e < kE; ++e) products<C>(u + e * C * C, v + e * step, m + e * C);
    for (int t = 0; t < T; ++t) {
      int n, i, j;
      g.tile(tb + t, &n, &i, &j);
      output_tile<C>(g, m + t * kE * C, bias, add, y + n * g.image, 4 * i, 4 * j);
    }
  }
}

// A dY A^T of the 4x4 gradient tile (i, j), zero outside the output, into y[e * step + channel].
template <int C>
CNN_AVX512 void gradient_tile(const Geo& g, const float* image, int i, int j, float* y, int step) {
  for (int ch = 0; ch < C; ch += 16) {
    __m512 t[6][4];  // A dY, column by column
    for (int c = 0; c < 4; ++c) {
      __m512 m[4], col[6];
      const int x = 4 * j + c;
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const int yy = 4 * i + r;
        const bool in = yy < g.h && x < g.w;
        m[r] = _mm512_maskz_loadu_ps(in ? 0xFFFF : 0,
                                     image + (in ? static_cast<size_t>(yy) * g.w + x : 0) * C + ch);
      }
      a4(m, col);
#pragma GCC unroll 6
      for (int a = 0; a < 6; ++a) t[a][c] = col[a];
    }
    for (int a = 0; a < 6; ++a) {
      __m512 out[6];
      a4(t[a], out);
#pragma GCC unroll 6
      for (int b = 0; b < 6; ++b) _mm512_storeu_ps(y + (6 * a + b) * step + ch, out[b]);
    }
  }
}

// One tile element: w[panel_at(ci, co)] (+)= sum over the T tiles of v[t * C + ci] * y[t * C + co], the tiles in
// order, 16 input by 16 output channels at a time (16 sums in registers); `first`: w is written, not read (a memset of
// the chunk's sums before its first group took 7% of a call at 64 channels, docs/perf.md, eighteenth pass).
template <int C>
CNN_AVX512 void accumulate(const float* v, const float* y, int T, bool first, float* w) {
  for (int cb = 0; cb < C; cb += 16)
    for (int ci0 = 0; ci0 < C; ci0 += 16) {
      float* wp = w + cb * C + ci0 * 16;
      __m512 acc[16];
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) acc[k] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(wp + k * 16);
      for (int t = 0; t < T; ++t) {
        const __m512 yt = _mm512_loadu_ps(y + t * C + cb);
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(v[t * C + ci0 + k]), yt, acc[k]);
      }
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) _mm512_storeu_ps(wp + k * 16, acc[k]);
    }
}

template <int C>
CNN_AVX512 void filter_chunk(const Geo& g, const float* x, const float* dy, int n0, int n1, float* part) {
  tls_buffers.ensure();
  float* v = tls_buffers.v;
  float* yb = tls_buffers.y;
  constexpr int group = group_of(C), step = filter_step(C);
  const long long first = n0 * g.per, last = n1 * g.per;
  if (first >= last) std::memset(part, 0, sizeof(float) * kE * C * C);  // no tiles (callers pass n1 > n0)
  for (long long t0 = first; t0 < last; t0 += group) {
    const int T = static_cast<int>(last - t0 < group ? last - t0 : group);
    for (int t = 0; t < T; ++t) {
      int n, i, j;
      g.tile(t0 + t, &n, &i, &j);
      input_tile<C>(g, x + n * g.image, i, j, v + t * C, step);
      gradient_tile<C>(g, dy + n * g.image, i, j, yb + t * C, step);
    }
    for (int e = 0; e < kE; ++e) accumulate<C>(v + e * step, yb + e * step, T, t0 == first, part + e * C * C);
  }
}

bool cpu_has_avx512f() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

}  // namespace

// The switch is read at each call (a few per convolution), so tests can compare both paths in one process.
bool avx512_kernels_enabled() {
  static const bool cpu = cpu_has_avx512f();
  if (!cpu) return false;
  const char* e = std::getenv("CNNTRAIN_AVX512_KERNELS");
  return !(e && std::strcmp(e, "0") == 0);
}

bool wino16_avx512_takes(int c) { return c == 16 || c == 32 || c == 64; }

void wino16_avx512_tiles(int c, int h, int w, const float* x, const float* u, const float* bias, bool add, long long t0,
                         long long t1, float* y) {
  const Geo g(h, w, c);
  switch (c) {
    case 16: return tiles<16>(g, x, u, bias, add, t0, t1, y);
    case 32: return tiles<32>(g, x, u, bias, add, t0, t1, y);
    case 64: return tiles<64>(g, x, u, bias, add, t0, t1, y);
    default: raise(kExitFailure, "internal: AVX-512 Winograd kernels for %d channels (ask wino16_avx512_takes)", c);
  }
}

void wino16_avx512_filter_chunk(int c, int h, int w, const float* x, const float* dy, int n0, int n1, float* part) {
  const Geo g(h, w, c);
  switch (c) {
    case 16: return filter_chunk<16>(g, x, dy, n0, n1, part);
    case 32: return filter_chunk<32>(g, x, dy, n0, n1, part);
    case 64: return filter_chunk<64>(g, x, dy, n0, n1, part);
    default: raise(kExitFailure, "internal: AVX-512 Winograd kernels for %d channels (ask wino16_avx512_takes)", c);
  }
}

#endif

}  // namespace cnn
