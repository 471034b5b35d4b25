#include "kernels/join.h"

namespace cnn {

void add_forward_cpu(size_t n, const float* a, const float* b, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul_forward_cpu(int n, int hw, int c, const float* x, const float* s, float* y) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < hw; ++j)
      for (int k = 0; k < c; ++k) {
        const size_t o = (static_cast<size_t>(i) * hw + j) * c + k;
        y[o] = x[o] * s[static_cast<size_t>(i) * c + k];
      }
}

void mul_backward_cpu(int n, int hw, int c, const float* x, const float* s, const float* dy, float* dx, float* ds,
                      bool accumulate) {
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < c; ++k) {
      const size_t si = static_cast<size_t>(i) * c + k;
      float sum = 0.f;
      for (int j = 0; j < hw; ++j) {
        const size_t o = (static_cast<size_t>(i) * hw + j) * c + k;
        if (dx) dx[o] = (accumulate ? dx[o] : 0.f) + dy[o] * s[si];
        if (ds) sum += dy[o] * x[o];
      }
      if (ds) ds[si] = (accumulate ? ds[si] : 0.f) + sum;
    }
}

void concat_copy_in_cpu(int rows, int width, int stride, int offset, const float* x, float* y) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j)
      y[static_cast<size_t>(r) * stride + offset + j] = x[static_cast<size_t>(r) * width + j];
}

void concat_copy_out_cpu(int rows, int width, int stride, int offset, const float* dy, float* dx, bool accumulate) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) {
      const size_t o = static_cast<size_t>(r) * width + j;
      const float g = dy[static_cast<size_t>(r) * stride + offset + j];
      dx[o] = accumulate ? dx[o] + g : g;
    }
}

}  // namespace cnn
