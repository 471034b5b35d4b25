#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv2d.h"

namespace cnn {

void conv2d_forward_cpu(const ConvDesc& d, const float* x, const float* w, const float* b, float* y) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c;
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
        for (int r = 0; r < d.r; ++r) {
          int h = p * d.stride_h - d.pad_h + r;
          if (h < 0 || h >= d.h) continue;
          for (int s = 0; s < d.s; ++s) {
            int ww = q * d.stride_w - d.pad_w + s;
            if (ww < 0 || ww >= d.w) continue;
            const float* in = x + ((static_cast<size_t>(n) * d.h + h) * d.w + ww) * C;
            const float* wk = &wt[(static_cast<size_t>(r) * d.s + s) * C * K];
            for (int c = 0; c < C; ++c) {
              const float v = in[c];
              const float* wc = wk + static_cast<size_t>(c) * K;
              for (int k = 0; k < K; ++k) out[k] += v * wc[k];
            }
          }
        }
      }
}

void conv2d_backward_data_cpu(const ConvDesc& d, const float* dy, const float* w, float* dx) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c;
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(d.n) * d.h * d.w * C);
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        for (int r = 0; r < d.r; ++r) {
          int h = p * d.stride_h - d.pad_h + r;
          if (h < 0 || h >= d.h) continue;
          for (int s = 0; s < d.s; ++s) {
            int ww = q * d.stride_w - d.pad_w + s;
            if (ww < 0 || ww >= d.w) continue;
            float* out = dx + ((static_cast<size_t>(n) * d.h + h) * d.w + ww) * C;
            for (int k = 0; k < K; ++k) {
              const float gk = g[k];
              const float* wk = w + ((static_cast<size_t>(k) * d.r + r) * d.s + s) * C;
              for (int c = 0; c < C; ++c) out[c] += gk * wk[c];
            }
          }
        }
      }
}

void conv2d_backward_filter_cpu(const ConvDesc& d, const float* x, const float* dy, float* dw, float* db) {
  const int P = d.p(), Q = d.q(), K = d.k, C = d.c;
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        const float* g = dy + ((static_cast<size_t>(n) * P + p) * Q + q) * K;
        if (db)
          for (int k = 0; k < K; ++k) db[k] += g[k];
        for (int r = 0; r < d.r; ++r) {
          int h = p * d.stride_h - d.pad_h + r;
          if (h < 0 || h >= d.h) continue;
          for (int s = 0; s < d.s; ++s) {
            int ww = q * d.stride_w - d.pad_w + s;
            if (ww < 0 || ww >= d.w) continue;
            const float* in = x + ((static_cast<size_t>(n) * d.h + h) * d.w + ww) * C;
            for (int k = 0; k < K; ++k) {
              const float gk = g[k];
              float* wk = dw + ((static_cast<size_t>(k) * d.r + r) * d.s + s) * C;
              for (int c = 0; c < C; ++c) wk[c] += gk * in[c];
            }
          }
        }
      }
}

}  // namespace cnn
