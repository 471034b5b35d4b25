#include <cstring>
#include <limits>

#include "kernels/pooling.h"
#include "kernels/window.h"

namespace cnn {

void maxpool_forward_cpu(const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax) {
  const int P = d.p(), Q = d.q(), C = d.c;
  const Window win = window_of(d);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        for (int c = 0; c < C; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t at = -1;
          for_each_tap(win, n, p, q, [&](size_t pixel, int) {
            const int32_t i = static_cast<int32_t>(pixel * C + c);
            // `!(x <= best)` lets a NaN win, so NaNs propagate instead of vanishing.
            if (at < 0 || !(x[i] <= best)) {
              best = x[i];
              at = i;
            }
          });
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

void avgpool_forward_cpu(const PoolDesc& d, const float* x, float* y) {
  const int P = d.p(), Q = d.q(), C = d.c;
  const Window win = window_of(d);
  const AvgCount count = avg_count_of(d);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* out = y + ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        for (int c = 0; c < C; ++c) out[c] = 0.f;
        const int taps = for_each_tap(win, n, p, q, [&](size_t pixel, int) {
          for (int c = 0; c < C; ++c) out[c] += x[pixel * C + c];
        });
        const float inv = taps ? 1.0f / avg_divisor(win, count, p, q) : 0.f;
        for (int c = 0; c < C; ++c) out[c] *= inv;
      }
}

void avgpool_backward_cpu(const PoolDesc& d, const float* dy, float* dx) {
  const int P = d.p(), Q = d.q(), C = d.c;
  const Window win = window_of(d);
  const AvgCount count = avg_count_of(d);
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * C);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const int taps = window_taps(win, p, q);
        if (taps == 0) continue;
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * C;
        const float inv = 1.0f / avg_divisor(win, count, p, q);
        for_each_tap(win, n, p, q, [&](size_t pixel, int) {
          for (int c = 0; c < C; ++c) dx[pixel * C + c] += g[c] * inv;
        });
      }
}

}  // namespace cnn
