// Optimizer updates over flat parameter/gradient/state buffers.
// SGD (PyTorch convention): g' = g + wd*w; v = momentum*v + g'; w -= lr * (nesterov ? g' + momentum*v : v).
// AdamW (Loshchilov & Hutter, decoupled decay): w -= lr*wd*w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// w -= lr * (m/bc1) / (sqrt(v/bc2) + eps) with the bias corrections bc1 = 1-b1^t, bc2 = 1-b2^t of step t >= 1.
#pragma once
#include <cstddef>

namespace cnn {

void sgd_update_cpu(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd, bool nesterov);
void adamw_update_cpu(size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1, float beta2,
                      float eps, float wd, float bc1, float bc2);

}  // namespace cnn
