#include <cstring>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/window.h"

namespace cnn {

void conv2d_forward_cpu(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c;
  const Window win = window_of(d);
  // Filters as [R,S,C,K] so the innermost loop runs over contiguous output channels (vectorises).
  thread_local std::vector<float> wt;
  wt.resize(static_cast<size_t>(d.r) * d.s * C * K);
  for (int k = 0; k < K; ++k)
    for (int rsc = 0; rsc < d.r * d.s * C; ++rsc) wt[static_cast<size_t>(rsc) * K + k] = w[static_cast<size_t>(k) * d.r * d.s * C + rsc];
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* out = y + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        for (int k = 0; k < K; ++k) out[k] = b ? b[k] : 0.f;
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          const float* in = x + pixel * C;
          const float* wk = &wt[static_cast<size_t>(tap) * C * K];
          for (int c = 0; c < C; ++c) {
            const float v = in[c];
            const float* wc = wk + static_cast<size_t>(c) * K;
            for (int k = 0; k < K; ++k) out[k] += v * wc[k];
          }
        });
      }
}

void conv2d_backward_data_cpu(const ConvDesc& d, const float* dy, const float* w, float* dx) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c, RS = d.r * d.s;
  const Window win = window_of(d);
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * C);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          float* out = dx + pixel * C;
          for (int k = 0; k < K; ++k) {
            const float gk = g[k];
            const float* wk = w + (static_cast<size_t>(k) * RS + tap) * C;
            for (int c = 0; c < C; ++c) out[c] += gk * wk[c];
          }
        });
      }
}

void conv2d_backward_filter_cpu(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c;
  const Window win = window_of(d);
  const size_t k_stride = static_cast<size_t>(d.r) * d.s * C;
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        if (db)
          for (int k = 0; k < K; ++k) db[k] += g[k];
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          const float* in = x + pixel * C;
          float* wt = dw + static_cast<size_t>(tap) * C;
          for (int k = 0; k < K; ++k) {
            const float gk = g[k];
            float* wk = wt + k * k_stride;
            for (int c = 0; c < C; ++c) wk[c] += gk * in[c];
          }
        });
      }
}

}  // namespace cnn
