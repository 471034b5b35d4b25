#include "kernels/cpu/fast_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_parallel.h"
#include "kernels/dtype.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/pooling.h"
#include "kernels/window.h"

namespace cnn {

void fill_fast(int threads, float* x, size_t n, float v) {
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) { x[i] = v; });
}

void relu_forward_fast(int threads, size_t n, const float* x, float* y) {
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) { y[i] = x[i] > 0.f ? x[i] : 0.f; });
}

void relu_backward_fast(int threads, size_t n, const float* y, const float* dy, float* dx) {
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) { dx[i] = y[i] > 0.f ? dy[i] : 0.f; });
}

namespace {

// One output pixel: max over its window taps, channels innermost. `restrict` lets the channel loops vectorise
// (compare + blend of value and index).
void pool_pixel(const PoolDesc& d, const float* __restrict x, int n, int p, int q, float* __restrict yo,
                int32_t* __restrict ao) {
  const int C = d.c;
  bool first = true;
  for_each_tap(window_of(d), n, p, q, [&](size_t pixel, int) {
    const int32_t base = static_cast<int32_t>(pixel * C);
    const float* __restrict xi = x + base;
    if (first) {
      for (int c = 0; c < C; ++c) {
        yo[c] = xi[c];
        ao[c] = base + c;
      }
      first = false;
    } else {
      // `!(v <= best)`: the first maximum wins ties and a NaN wins, as in the reference.
      for (int c = 0; c < C; ++c) {
        const float v = xi[c], b = yo[c];
        const bool take = !(v <= b);
        yo[c] = take ? v : b;
        ao[c] = take ? base + c : ao[c];
      }
    }
  });
  if (first)
    for (int c = 0; c < C; ++c) {
      yo[c] = -std::numeric_limits<float>::infinity();
      ao[c] = -1;
    }
}

// The common 2x2 window without padding (any stride): every tap exists, so no bounds checks and no first-tap
// branch per pixel (with few channels, e.g. LeNet's 6, the generic loop spends its time on that bookkeeping).
bool is_2x2(const PoolDesc& d) {
  return d.r == 2 && d.s == 2 && d.pad == 0 && d.extra_pad_h == 0 && d.extra_pad_w == 0;
}

// The taps of a 2x2 window as flat offsets from its first, in the reference's order: (0,0), (0,1), (1,0), (1,1).
struct Taps2x2 {
  int32_t off[4];
};
Taps2x2 taps_2x2(const PoolDesc& d) { return {{0, d.c, d.w * d.c, (d.w + 1) * d.c}}; }

// Flat offset of output row (n, p)'s first window's first tap.
int32_t window_row(const PoolDesc& d, int n, int p) {
  return static_cast<int32_t>((static_cast<size_t>(n) * d.h + static_cast<size_t>(p) * d.stride) * d.w * d.c);
}

// Channels [0, C) of the window whose first tap is x[i0], one at a time, the ReLU in the same pass.
void pool_pixel_2x2(const float* __restrict x, int32_t i0, const Taps2x2& t, int C, bool relu, float* __restrict yo,
                    int32_t* __restrict ao) {
  for (int c = 0; c < C; ++c) {
    float best = x[i0 + c];
    int32_t at = i0 + c;
    for (int k = 1; k < 4; ++k) {
      const float v = x[i0 + t.off[k] + c];
      const bool take = !(v <= best);  // the first maximum wins ties, a NaN wins (as the reference)
      best = take ? v : best;
      at = take ? i0 + t.off[k] + c : at;
    }
    yo[c] = relu && !(best > 0.f) ? 0.f : best;
    ao[c] = at;
  }
}

// dx[argmax] = 0 + dy where the ReLU gate m > 0 is open, else 0, over `count` outputs whose windows are
// disjoint, on a zeroed dx: the reference's += on zeros (a -0 lands as +0), each dx receiving at most one dy. The
// value is selected rather than branched on: the gate opens at random.
void scatter_disjoint(const float* g, const int32_t* a, const float* m, size_t count, float* dx) {
  for (size_t i = 0; i < count; ++i)
    if (a[i] >= 0) dx[a[i]] = !m || m[i] > 0.f ? 0.f + g[i] : 0.f;
}

#if defined(__AVX2__)
// With AVX2 a row's pixels take eight channels per step, the last block of a pixel moved back to end at C (it
// recomputes a few channels: same values). With C < 8 a pixel's eight lanes run into the next pixels' (the
// loads stay inside the row's data, the next pixels store theirs later in the row): the row's
// last pixels, where the eight would run past the row, take the plain loop. This many pixels take vectors:
int vector_pixels(int C, int Q) { return C >= 8 ? Q : std::max(0, Q - (8 + C - 1) / C + 1); }
int block_start(int c0, int C) { return c0 + 8 <= C ? c0 : std::max(0, C - 8); }

// pool_pixel_2x2 on channels [0, 8): value and index compared and blended in registers.
void pool8_2x2(const float* x, int32_t i0, const Taps2x2& t, bool relu, float* yo, int32_t* ao) {
  const __m256i first = _mm256_add_epi32(_mm256_set1_epi32(i0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 best = _mm256_loadu_ps(x + i0);
  __m256i at = first;
  for (int k = 1; k < 4; ++k) {
    const __m256 v = _mm256_loadu_ps(x + i0 + t.off[k]);
    const __m256 take = _mm256_cmp_ps(v, best, _CMP_NLE_UQ);  // !(v <= best), as pool_pixel_2x2
    best = _mm256_blendv_ps(best, v, take);
    const __m256i tap = _mm256_add_epi32(first, _mm256_set1_epi32(t.off[k]));
    at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(tap), take));
  }
  // maxps returns its second operand for a NaN or two zeros: +0, as !(best > 0) ? 0 : best.
  if (relu) best = _mm256_max_ps(best, _mm256_setzero_ps());
  _mm256_storeu_ps(yo, best);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(ao), at);
}

// scatter_disjoint for channels [0, 8) of one output pixel of a stride-2 2x2 pooling (first tap dx[i0]), as
// four vector stores of its taps: 0 + dy where the tap won and the gate is open, else 0. With C < 8 the lanes
// past C hold the next pixels' dy and argmax: they store 0, or at that pixel's winning tap its own value, and
// the next pixels write theirs later (all four taps, or their winners on the zeros).
void unpool8_2x2(const float* g, const int32_t* a, const float* m, int32_t i0, const Taps2x2& t, float* dx) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 v = _mm256_add_ps(zero, _mm256_loadu_ps(g));
  if (m) v = _mm256_and_ps(v, _mm256_cmp_ps(_mm256_loadu_ps(m), zero, _CMP_GT_OQ));
  const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i first = _mm256_add_epi32(_mm256_set1_epi32(i0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int k = 0; k < 4; ++k) {
    const __m256i won = _mm256_cmpeq_epi32(at, _mm256_add_epi32(first, _mm256_set1_epi32(t.off[k])));
    _mm256_storeu_ps(dx + i0 + t.off[k], _mm256_and_ps(v, _mm256_castsi256_ps(won)));
  }
}
#endif

// Output row (n, p) of a 2x2 pooling: y and argmax at y, a.
void pool_row_2x2(const PoolDesc& d, const float* x, int n, int p, bool relu, float* y, int32_t* a) {
  const int C = d.c, Q = d.q();
  const int32_t row = window_row(d, n, p), step = d.stride * C;
  const Taps2x2 t = taps_2x2(d);
  int q = 0;
#if defined(__AVX2__)
  for (; q < vector_pixels(C, Q); ++q)
    for (int c0 = 0; c0 < C; c0 += 8) {
      const int c = block_start(c0, C);
      pool8_2x2(x, row + q * step + c, t, relu, y + q * C + c, a + q * C + c);
    }
#endif
  for (; q < Q; ++q) pool_pixel_2x2(x, row + q * step, t, C, relu, y + q * C, a + q * C);
}

// dx of sample n of a stride-2 2x2 pooling. The sample is zeroed first (memset: a rep stosb that claims the
// lines without reading them, and leaves them in cache), then the windows are written there: writing them
// straight to memory reads every line first (LeNet-5's first pooling backward, one thread: 0.35 instead of 0.50 ms).
void unpool_sample_2x2(const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax, int n,
                       float* dx) {
  const int C = d.c, P = d.p(), Q = d.q();
  const size_t in = static_cast<size_t>(d.h) * d.w * C;
  std::memset(dx + n * in, 0, sizeof(float) * in);
  for (int p = 0; p < P; ++p) {
    const size_t o = (static_cast<size_t>(n) * P + p) * Q * C;
    const float* g = dy + o;
    const int32_t* a = argmax + o;
    const float* m = relu_y ? relu_y + o : nullptr;
    int q = 0;
#if defined(__AVX2__)
    const int32_t row = window_row(d, n, p);
    const Taps2x2 t = taps_2x2(d);
    // With at most half the lanes used the four stores a pixel cost more than the scatter (LeNet-5: C = 6).
    for (const int vector = C > 4 ? vector_pixels(C, Q) : 0; q < vector; ++q)
      for (int c0 = 0; c0 < C; c0 += 8) {
        const int c = block_start(c0, C), j = q * C + c;
        unpool8_2x2(g + j, a + j, m ? m + j : nullptr, row + q * 2 * C + c, t, dx);
      }
#endif
    const size_t j = static_cast<size_t>(q) * C;
    scatter_disjoint(g + j, a + j, m ? m + j : nullptr, static_cast<size_t>(Q - q) * C, dx);
  }
}

}  // namespace

void maxpool_forward_fast(int threads, const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax) {
  const int P = d.p(), Q = d.q();
  const size_t row = static_cast<size_t>(Q) * d.c;
  const size_t work = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  const bool fast2x2 = is_2x2(d);
  parallel_for(threads, work, static_cast<long long>(d.n) * P, [&](long long np) {
    const int n = static_cast<int>(np / P), p = static_cast<int>(np % P);
    float* __restrict yr = y + (static_cast<size_t>(n) * P + p) * row;
    if (fast2x2) return pool_row_2x2(d, x, n, p, relu, yr, argmax + (yr - y));
    for (int q = 0; q < Q; ++q) {
      const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * d.c;
      pool_pixel(d, x, n, p, q, y + o, argmax + o);
    }
    if (relu)
      for (size_t i = 0; i < row; ++i) yr[i] = yr[i] > 0.f ? yr[i] : 0.f;
  });
}

void maxpool_backward_fast(int threads, const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax,
                           float* dx) {
  const int P = d.p();
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(P) * d.q() * d.c;
  if (is_2x2(d) && d.stride == 2) {
    parallel_for(threads, in * d.n, d.n, [&](long long n) { unpool_sample_2x2(d, dy, relu_y, argmax, n, dx); });
    return;
  }
  // A sample's winners lie inside that sample's input, so samples are independent.
  parallel_for(threads, in * d.n, d.n, [&](long long n) {
    std::memset(dx + n * in, 0, sizeof(float) * in);
    const int32_t* a = argmax + n * out;
    const float* g = dy + n * out;
    const float* m = relu_y ? relu_y + n * out : nullptr;
    for (size_t i = 0; i < out; ++i)
      if (a[i] >= 0 && (!m || m[i] > 0.f)) dx[a[i]] += g[i];
  });
}

void sgd_update_fast(int threads, size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                     bool nesterov) {
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) {
    const float gi = g[i] + wd * w[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  });
}

void adamw_update_fast(int threads, size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1,
                       float beta2, float eps, float wd, float bc1, float bc2) {
  const float inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (wd * w[i] + (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + eps));
  });
}

namespace {

// y += alpha x in fp32 on the values as stored (bf16: widened, the sum rounded once); one expression for both
// types, so the bf16 result is the fp32 kernel's on the widened values, rounded.
template <class T>
void axpy_typed(int threads, size_t n, float alpha, const T* x, T* y) {
  parallel_for(threads, n, static_cast<long long>(n),
               [=](long long i) { y[i] = from_float<T>(to_float(y[i]) + alpha * to_float(x[i])); });
}

}  // namespace

void axpy_fast(int threads, size_t n, float alpha, const float* x, float* y) { axpy_typed(threads, n, alpha, x, y); }
void axpy_fast(int threads, size_t n, float alpha, const Bf16* x, Bf16* y) { axpy_typed(threads, n, alpha, x, y); }

void scale_fast(int threads, size_t n, float alpha, float* x) {
  parallel_for(threads, n, static_cast<long long>(n), [=](long long i) { x[i] *= alpha; });
}

double sum_squares_fast(int threads, size_t n, const float* x) {
  // Fixed chunks summed in order: the same bits for any thread count.
  constexpr size_t kChunk = 1 << 16;
  const long long chunks = static_cast<long long>((n + kChunk - 1) / kChunk);
  thread_local std::vector<double> part;
  part.assign(chunks, 0.0);
  double* out = part.data();
  parallel_for(threads, n, chunks, [=](long long q) {
    const size_t b = q * kChunk, e = std::min(n, b + kChunk);
    double s = 0;
    for (size_t i = b; i < e; ++i) s += static_cast<double>(x[i]) * x[i];
    out[q] = s;
  });
  double s = 0;
  for (long long q = 0; q < chunks; ++q) s += out[q];
  return s;
}

// Samples are independent in the ops below: each thread runs the reference kernel on whole samples, so the
// results are the reference's bits.
namespace {

struct Samples {  // n samples of `in` input and `out` output elements each
  long long n;
  size_t in, out;
};

// f(input offset, output offset) of each sample, the samples split over the threads.
template <class F>
void for_each_sample(int threads, const Samples& s, F f) {
  parallel_for(threads, (s.in + s.out) * s.n, s.n, [&](long long i) { f(i * s.in, i * s.out); });
}

Samples shortcut_samples(int n, int h, int w, int c, int stride, int k) {
  return {n, static_cast<size_t>(h) * w * c,
          static_cast<size_t>((h + stride - 1) / stride) * ((w + stride - 1) / stride) * k};
}

Samples pool_samples(const PoolDesc& d) {
  return {d.n, static_cast<size_t>(d.h) * d.w * d.c, static_cast<size_t>(d.p()) * d.q() * d.c};
}

PoolDesc one_sample(PoolDesc d) {
  d.n = 1;
  return d;
}

}  // namespace

void shortcut_pad_forward_fast(int threads, int n, int h, int w, int c, int stride, int k, const float* x,
                               float* y) {
  for_each_sample(threads, shortcut_samples(n, h, w, c, stride, k),
                  [&](size_t i, size_t o) { shortcut_pad_forward_cpu(1, h, w, c, stride, k, x + i, y + o); });
}

void shortcut_pad_backward_add_fast(int threads, int n, int h, int w, int c, int stride, int k, const float* dy,
                                    float* dx) {
  for_each_sample(threads, shortcut_samples(n, h, w, c, stride, k),
                  [&](size_t i, size_t o) { shortcut_pad_backward_add_cpu(1, h, w, c, stride, k, dy + o, dx + i); });
}

void avgpool_forward_fast(int threads, const PoolDesc& d, const float* x, float* y) {
  const PoolDesc one = one_sample(d);
  for_each_sample(threads, pool_samples(d), [&](size_t i, size_t o) { avgpool_forward_cpu(one, x + i, y + o); });
}

void avgpool_backward_fast(int threads, const PoolDesc& d, const float* dy, float* dx) {
  const PoolDesc one = one_sample(d);
  for_each_sample(threads, pool_samples(d), [&](size_t i, size_t o) { avgpool_backward_cpu(one, dy + o, dx + i); });
}

void dropout_forward_fast(int threads, int n, size_t per_sample, const float* x, float p, uint64_t key,
                          const int64_t* ids, float* y, uint8_t* mask) {
  parallel_for(threads, per_sample * n, n, [&](long long i) {
    const size_t o = i * per_sample;
    dropout_forward_cpu(1, per_sample, x + o, p, key, ids + i, y + o, mask + o);
  });
}

void dropout_backward_fast(int threads, size_t count, float p, const float* dy, const uint8_t* mask, float* dx) {
  const float keep_scale = 1.0f / (1.0f - p);
  parallel_for(threads, count, static_cast<long long>(count),
               [=](long long i) { dx[i] = mask[i] ? dy[i] * keep_scale : 0.f; });
}

}  // namespace cnn
