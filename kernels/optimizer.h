// Optimizer updates over flat parameter/gradient/state buffers.
// SGD (PyTorch convention): g' = g + wd*w; v = momentum*v + g'; w -= lr * (nesterov ? g' + momentum*v : v).
#pragma once
#include <cstddef>

namespace cnn {

void sgd_update_cpu(size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd, bool nesterov);

}  // namespace cnn
