#include "kernels/fast_cpu.h"

#include <cstring>
#include <limits>

namespace cnn {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kMinParallel = 1 << 15;

// for i in [0, count): body(i), statically split over the threads when the work is large enough. One thread
// runs the loop directly: a one-thread OpenMP region still allocates a team every time.
template <class F>
void parallel_for(int threads, size_t work, long long count, F body) {
  if (threads <= 1 || work < kMinParallel) {
    for (long long i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long i = 0; i < count; ++i) body(i);
}

}  // namespace

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
  for (int r = 0; r < d.r; ++r) {
    const int h = p * d.stride - d.pad + r;
    if (h < 0 || h >= d.h) continue;
    for (int s = 0; s < d.s; ++s) {
      const int w = q * d.stride - d.pad + s;
      if (w < 0 || w >= d.w) continue;
      const int32_t base = static_cast<int32_t>(((static_cast<size_t>(n) * d.h + h) * d.w + w) * C);
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
    }
  }
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

void maxpool_forward_fast(int threads, const PoolDesc& d, const float* x, float* y, int32_t* argmax) {
  const int P = d.p(), Q = d.q();
  const size_t work = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  const bool fast2x2 = d.r == 2 && d.s == 2 && d.pad == 0;
  parallel_for(threads, work, static_cast<long long>(d.n) * P, [&](long long np) {
    const int n = static_cast<int>(np / P), p = static_cast<int>(np % P);
    if (fast2x2) {
      const size_t o = (static_cast<size_t>(n) * P + p) * Q * d.c;
      pool_row_2x2(d, x, n, p, y + o, argmax + o);
      return;
    }
    for (int q = 0; q < Q; ++q) {
      const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * d.c;
      pool_pixel(d, x, n, p, q, y + o, argmax + o);
    }
  });
}

void maxpool_backward_fast(int threads, const PoolDesc& d, const float* dy, const int32_t* argmax, float* dx) {
  const size_t in = static_cast<size_t>(d.h) * d.w * d.c, out = static_cast<size_t>(d.p()) * d.q() * d.c;
  // A sample's winners lie inside that sample's input, so samples are independent.
  parallel_for(threads, in * d.n, d.n, [&](long long n) {
    std::memset(dx + n * in, 0, sizeof(float) * in);
    const int32_t* a = argmax + n * out;
    const float* g = dy + n * out;
    for (size_t i = 0; i < out; ++i)
      if (a[i] >= 0) dx[a[i]] += g[i];
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

}  // namespace cnn
