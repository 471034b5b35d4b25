#include <cstring>
#include <vector>

#include "kernels/linear.h"

namespace cnn {

void linear_forward_cpu(int m, int k, int n, const float* x, const float* w, const float* b, float* y) {
  // w^T as [K,N] so the inner loop runs over contiguous outputs.
  thread_local std::vector<float> wt;
  wt.resize(static_cast<size_t>(k) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < k; ++i) wt[static_cast<size_t>(i) * n + j] = w[static_cast<size_t>(j) * k + i];
  for (int r = 0; r < m; ++r) {
    float* out = y + static_cast<size_t>(r) * n;
    for (int j = 0; j < n; ++j) out[j] = b ? b[j] : 0.f;
    const float* in = x + static_cast<size_t>(r) * k;
    for (int i = 0; i < k; ++i) {
      const float v = in[i];
      const float* wi = &wt[static_cast<size_t>(i) * n];
      for (int j = 0; j < n; ++j) out[j] += v * wi[j];
    }
  }
}

void linear_backward_data_cpu(int m, int k, int n, const float* dy, const float* w, float* dx) {
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(m) * k);
  for (int r = 0; r < m; ++r) {
    float* out = dx + static_cast<size_t>(r) * k;
    for (int j = 0; j < n; ++j) {
      const float g = dy[static_cast<size_t>(r) * n + j];
      const float* wj = w + static_cast<size_t>(j) * k;
      for (int i = 0; i < k; ++i) out[i] += g * wj[i];
    }
  }
}

void linear_backward_weight_cpu(int m, int k, int n, const float* x, const float* dy, float* dw, float* db) {
  for (int r = 0; r < m; ++r) {
    const float* in = x + static_cast<size_t>(r) * k;
    for (int j = 0; j < n; ++j) {
      const float g = dy[static_cast<size_t>(r) * n + j];
      if (db) db[j] += g;
      float* wj = dw + static_cast<size_t>(j) * k;
      for (int i = 0; i < k; ++i) wj[i] += g * in[i];
    }
  }
}

}  // namespace cnn
