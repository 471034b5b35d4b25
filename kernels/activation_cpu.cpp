#include "kernels/activation.h"

namespace cnn {

void relu_forward_cpu(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void relu_backward_cpu(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

void activation_forward_cpu(const Activation& a, size_t n, const float* x, float* y) {
  act_dispatch(a.kind, [&](auto tag) {
    constexpr ActKind K = decltype(tag)::kind;
    for (size_t i = 0; i < n; ++i) y[i] = act_value<K>(x[i], a.alpha, a.beta);
  });
}

void activation_backward_cpu(const Activation& a, size_t n, const float* x, const float* dy, float* dx,
                             bool accumulate) {
  act_dispatch(a.kind, [&](auto tag) {
    constexpr ActKind K = decltype(tag)::kind;
    for (size_t i = 0; i < n; ++i) {
      const float g = dy[i] * act_derivative<K>(x[i], a.alpha, a.beta);
      dx[i] = accumulate ? dx[i] + g : g;
    }
  });
}

}  // namespace cnn
