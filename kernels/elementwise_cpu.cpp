#include <cstring>

#include "kernels/elementwise.h"

namespace cnn {

void axpy_cpu(size_t n, float alpha, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void scale_cpu(size_t n, float alpha, float* x) {
  for (size_t i = 0; i < n; ++i) x[i] *= alpha;
}

double sum_squares_cpu(size_t n, const float* x) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void shortcut_pad_forward_cpu(int n, int h, int w, int c, int stride, int k, const float* x, float* y) {
  const int P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* out = y + ((static_cast<size_t>(i) * P + p) * Q + q) * k;
        const float* in = x + ((static_cast<size_t>(i) * h + p * stride) * w + q * stride) * c;
        std::memcpy(out, in, sizeof(float) * c);
        std::memset(out + c, 0, sizeof(float) * (k - c));
      }
}

void shortcut_pad_backward_add_cpu(int n, int h, int w, int c, int stride, int k, const float* dy, float* dx) {
  const int P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q) {
        float* to = dx + ((static_cast<size_t>(i) * h + p * stride) * w + q * stride) * c;
        const float* from = dy + ((static_cast<size_t>(i) * P + p) * Q + q) * k;
        for (int ch = 0; ch < c; ++ch) to[ch] += from[ch];
      }
}

}  // namespace cnn
