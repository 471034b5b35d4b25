#include "kernels/cpu/fast_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

}  // namespace

// The common 2x2 window without padding: every tap exists, so no bounds checks and no first-tap branch per
// pixel (with few channels, e.g. LeNet's 6, the generic loop spends its time on that bookkeeping).
static void pool_row_2x2(const PoolDesc& d, const float* __restrict x, int n, int p, float* __restrict y,
                  int32_t* __restrict a) {
  const int C = d.c, Q = d.q();
  const size_t row = static_cast<size_t>(d.w) * C;
  for (int q = 0; q < Q; ++q) {
    const int32_t b0 = static_cast<int32_t>(((static_cast<size_t>(n) * d.h + p * d.stride) * d.w + q * d.stride) * C);
    const int32_t taps[4] = {b0, b0 + C, static_cast<int32_t>(b0 + row), static_cast<int32_t>(b0 + row + C)};
    float* __restrict yo = y + static_cast<size_t>(q) * C;
    int32_t* __restrict ao = a + static_cast<size_t>(q) * C;
    for (int c = 0; c < C; ++c) {
      float best = x[taps[0] + c];
      int32_t at = taps[0] + c;
      for (int t = 1; t < 4; ++t) {
        const float v = x[taps[t] + c];
        const bool take = !(v <= best);  // first maximum wins ties, a NaN wins (as the reference)
        best = take ? v : best;
        at = take ? taps[t] + c : at;
      }
      yo[c] = best;
      ao[c] = at;
    }
  }
}

void maxpool_forward_fast(int threads, const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax) {
  const int P = d.p(), Q = d.q();
  const size_t row = static_cast<size_t>(Q) * d.c;
  const size_t work = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  const bool fast2x2 = d.r == 2 && d.s == 2 && d.pad == 0 && d.extra_pad_h == 0 && d.extra_pad_w == 0;
  parallel_for(threads, work, static_cast<long long>(d.n) * P, [&](long long np) {
    const int n = static_cast<int>(np / P), p = static_cast<int>(np % P);
    float* __restrict yr = y + (static_cast<size_t>(n) * P + p) * row;
    if (fast2x2) {
      pool_row_2x2(d, x, n, p, yr, argmax + (yr - y));
    } else {
      for (int q = 0; q < Q; ++q) {
        const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * d.c;
        pool_pixel(d, x, n, p, q, y + o, argmax + o);
      }
    }
    if (relu)
      for (size_t i = 0; i < row; ++i) yr[i] = yr[i] > 0.f ? yr[i] : 0.f;
  });
}

void maxpool_backward_fast(int threads, const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax,
                           float* dx) {
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(d.p()) * d.q() * d.c;
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

void shortcut_pad_backward_fast(int threads, int n, int h, int w, int c, int stride, int k, const float* dy,
                                float* dx) {
  for_each_sample(threads, shortcut_samples(n, h, w, c, stride, k),
                  [&](size_t i, size_t o) { shortcut_pad_backward_cpu(1, h, w, c, stride, k, dy + o, dx + i); });
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
