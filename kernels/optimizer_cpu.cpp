#include <cmath>

#include "kernels/optimizer.h"

namespace cnn {

void sgd_update_cpu(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                    bool nesterov) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * w[i];
    const float vi = momentum * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * (nesterov ? gi + momentum * vi : vi);
  }
}

void adamw_update_cpu(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                      float eps, float wd, float bc1, float bc2) {
  const float inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
  for (size_t i = 0; i < n; ++i) {
    const float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
    const float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (wd * w[i] + (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + eps));
  }
}

}  // namespace cnn
