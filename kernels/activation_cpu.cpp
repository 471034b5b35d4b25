#include "kernels/activation.h"

namespace cnn {

void relu_forward_cpu(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void relu_backward_cpu(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

}  // namespace cnn
