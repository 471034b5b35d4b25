#include <cstring>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/window.h"

namespace cnn {

// Group g reads input channels [g*C, (g+1)*C) and writes output channels [g*K, (g+1)*K), C = c/groups and
// K = k/groups; filters are [k, r, s, C]. With one group the loops below are those of the plain convolution.

void conv2d_forward_cpu(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  const int P = d.p(), Q = d.q(), G = d.groups, K = d.k, Kg = d.k / G, Cg = d.c / G;
  const Window win = window_of(d);
  // Filters as [R,S,Cg,K] so the innermost loop runs over contiguous output channels (vectorises).
  thread_local std::vector<float> wt;
  const int rsc = d.r * d.s * Cg;
  wt.resize(static_cast<size_t>(rsc) * K);
  for (int k = 0; k < K; ++k)
    for (int i = 0; i < rsc; ++i) wt[static_cast<size_t>(i) * K + k] = w[static_cast<size_t>(k) * rsc + i];
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* out = y + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        for (int k = 0; k < K; ++k) out[k] = b ? b[k] : 0.f;
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          for (int g = 0; g < G; ++g) {
            const float* in = x + pixel * d.c + static_cast<size_t>(g) * Cg;
            const float* wk = &wt[static_cast<size_t>(tap) * Cg * K + static_cast<size_t>(g) * Kg];
            float* og = out + static_cast<size_t>(g) * Kg;
            for (int c = 0; c < Cg; ++c) {
              const float v = in[c];
              const float* wc = wk + static_cast<size_t>(c) * K;
              for (int k = 0; k < Kg; ++k) og[k] += v * wc[k];
            }
          }
        });
      }
}

void conv2d_backward_data_cpu(const ConvDesc& d, const float* dy, const float* w, float* dx) {
  const int P = d.p(), Q = d.q(), K = d.k, Kg = d.k / d.groups, Cg = d.c / d.groups, RS = d.r * d.s;
  const Window win = window_of(d);
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * d.c);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          for (int k = 0; k < K; ++k) {
            float* out = dx + pixel * d.c + static_cast<size_t>(k / Kg) * Cg;
            const float gk = g[k];
            const float* wk = w + (static_cast<size_t>(k) * RS + tap) * Cg;
            for (int c = 0; c < Cg; ++c) out[c] += gk * wk[c];
          }
        });
      }
}

void conv2d_backward_filter_cpu(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) {
  const int P = d.p(), Q = d.q(), K = d.k, Kg = d.k / d.groups, Cg = d.c / d.groups;
  const Window win = window_of(d);
  const size_t k_stride = static_cast<size_t>(d.r) * d.s * Cg;
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        if (db)
          for (int k = 0; k < K; ++k) db[k] += g[k];
        for_each_tap(win, n, p, q, [&](size_t pixel, int tap) {
          float* wt = dw + static_cast<size_t>(tap) * Cg;
          for (int k = 0; k < K; ++k) {
            const float* in = x + pixel * d.c + static_cast<size_t>(k / Kg) * Cg;
            const float gk = g[k];
            float* wk = wt + k * k_stride;
            for (int c = 0; c < Cg; ++c) wk[c] += gk * in[c];
          }
        });
      }
}

}  // namespace cnn
