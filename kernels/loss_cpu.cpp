#include <cmath>

#include "kernels/loss.h"
#include "kernels/mix_images.h"

namespace cnn {

namespace {

// Both losses: mix null is the one-hot target of softmax_xent_cpu.
void xent_rows(int n, int classes, const float* logits, const int32_t* labels, const MixDraw* mix, float eps,
               float scale, float* dlogits, double* loss_sum, int64_t* correct) {
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
    const double lam = mix ? mix[i].lam : 1.0;
    const int y2 = mix ? mix[i].partner_label : y;
    // The target t_j: the smoothed one-hot of y, or lam of y's and 1 - lam of y2's.
    auto target = [&](int j) {
      return mix ? off + (1.0 - eps) * (lam * (j == y) + (1.0 - lam) * (j == y2)) : (j == y ? on : off);
    };
    // loss = -sum_j t_j log p_j.
    double loss = 0.0;
    for (int j = 0; j < classes; ++j) loss -= target(j) * (z[j] - lse);
    *loss_sum += loss;
    if (arg == y) ++*correct;
    if (dlogits) {
      float* g = dlogits + static_cast<size_t>(i) * classes;
      for (int j = 0; j < classes; ++j) g[j] = static_cast<float>(scale * (std::exp(z[j] - lse) - target(j)));
    }
  }
}

}  // namespace

void softmax_xent_cpu(int n, int classes, const float* logits, const int32_t* labels, float eps, float scale,
                      float* dlogits, double* loss_sum, int64_t* correct) {
  xent_rows(n, classes, logits, labels, nullptr, eps, scale, dlogits, loss_sum, correct);
}

void softmax_xent_mix_cpu(int n, int classes, const float* logits, const int32_t* labels, const MixDraw* mix,
                          float eps, float scale, float* dlogits, double* loss_sum, int64_t* correct) {
  xent_rows(n, classes, logits, labels, mix, eps, scale, dlogits, loss_sum, correct);
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
