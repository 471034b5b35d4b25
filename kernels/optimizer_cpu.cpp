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

}  // namespace cnn
