#include <cstring>
#include <limits>

#include "kernels/pooling.h"

namespace cnn {

void maxpool_forward_cpu(const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax) {
  const int P = d.p(), Q = d.q(), C = d.c;
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        for (int c = 0; c < C; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t at = -1;
          for (int r = 0; r < d.r; ++r) {
            int h = p * d.stride - d.pad + r;
            if (h < 0 || h >= d.h) continue;
            for (int s = 0; s < d.s; ++s) {
              int w = q * d.stride - d.pad + s;
              if (w < 0 || w >= d.w) continue;
              int32_t i = static_cast<int32_t>(((static_cast<size_t>(n) * d.h + h) * d.w + w) * C + c);
              // `!(x <= best)` lets a NaN win, so NaNs propagate instead of vanishing.
              if (at < 0 || !(x[i] <= best)) {
                best = x[i];
                at = i;
              }
            }
          }
          y[o + c] = relu && !(best > 0.f) ? 0.f : best;
          argmax[o + c] = at;
        }
      }
}

void maxpool_backward_cpu(const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax, float* dx) {
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * d.c);
  const size_t out = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
  for (size_t i = 0; i < out; ++i)
    if (argmax[i] >= 0 && (!relu_y || relu_y[i] > 0.f)) dx[argmax[i]] += dy[i];
}

namespace {

// Calls f(flat input offset of channel 0) for every in-bounds tap of output (n, p, q); returns the tap count.
template <class F>
int for_taps(const PoolDesc& d, int n, int p, int q, F f) {
  int taps = 0;
  for (int r = 0; r < d.r; ++r) {
    const int h = p * d.stride - d.pad + r;
    if (h < 0 || h >= d.h) continue;
    for (int s = 0; s < d.s; ++s) {
      const int w = q * d.stride - d.pad + s;
      if (w < 0 || w >= d.w) continue;
      f(((static_cast<size_t>(n) * d.h + h) * d.w + w) * d.c);
      ++taps;
    }
  }
  return taps;
}

}  // namespace

void avgpool_forward_cpu(const PoolDesc& d, const float* x, float* y) {
  const int P = d.p(), Q = d.q(), C = d.c;
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* out = y + ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        for (int c = 0; c < C; ++c) out[c] = 0.f;
        const int taps = for_taps(d, n, p, q, [&](size_t i) {
          for (int c = 0; c < C; ++c) out[c] += x[i + c];
        });
        const float inv = taps ? 1.0f / taps : 0.f;
        for (int c = 0; c < C; ++c) out[c] *= inv;
      }
}

void avgpool_backward_cpu(const PoolDesc& d, const float* dy, float* dx) {
  const int P = d.p(), Q = d.q(), C = d.c;
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * C);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        const int taps = for_taps(d, n, p, q, [](size_t) {});
        if (taps == 0) continue;
        const float inv = 1.0f / taps;
        for_taps(d, n, p, q, [&](size_t i) {
          for (int c = 0; c < C; ++c) dx[i + c] += g[c] * inv;
        });
      }
}

}  // namespace cnn
