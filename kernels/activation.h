// Element-wise activations. relu: y = max(x, 0); backward: dx = dy * (y > 0).
#pragma once
#include <cstddef>

namespace cnn {

void relu_forward_cpu(size_t n, const float* x, float* y);
void relu_backward_cpu(size_t n, const float* y, const float* dy, float* dx);

}  // namespace cnn
