#include <cmath>

#include "kernels/loss.h"

namespace cnn {

void softmax_xent_cpu(int n, int classes, const float* logits, const int32_t* labels, float eps, float scale,
                      float* dlogits, double* loss_sum, int64_t* correct) {
  const double off = static_cast<double>(eps) / classes, on = 1.0 - eps + off;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    int arg = 0;
    for (int j = 1; j < classes; ++j)
      if (z[j] > z[arg]) arg = j;
    const double zmax = z[arg];
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - zmax);
    const double lse = zmax + std::log(sum);
    const int y = labels[i];
    // loss = -sum_j t_j log p_j with t = smoothed one-hot.
    double loss = 0.0;
    for (int j = 0; j < classes; ++j) loss -= (j == y ? on : off) * (z[j] - lse);
    *loss_sum += loss;
    if (arg == y) ++*correct;
    if (dlogits) {
      float* g = dlogits + static_cast<size_t>(i) * classes;
      for (int j = 0; j < classes; ++j)
        g[j] = static_cast<float>(scale * (std::exp(z[j] - lse) - (j == y ? on : off)));
    }
  }
}

int64_t topk_hits_cpu(int n, int classes, int k, const float* logits, const int32_t* labels) {
  int64_t hits = 0;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    const float zy = z[labels[i]];
    if (std::isnan(zy)) continue;
    int larger = 0;
    for (int j = 0; j < classes && larger < k; ++j) larger += z[j] > zy;
    hits += larger < k;
  }
  return hits;
}

}  // namespace cnn
