// Element-wise activations. relu: y = max(x, 0); backward: dx = dy * (y > 0).
//
// The parameterised activations of the graph-network ops (Activation, kernels/backend.h), as ONNX defines
// them, each with the derivative its backward multiplies dy by (a function of the forward's input x; at a
// kink the one PyTorch's backward takes, so that imported networks train as they did there):
//   LeakyRelu    y = x >= 0 ? x : alpha*x               f' = x > 0 ? 1 : alpha
//   Clip         y = min(max(x, alpha), beta)           f' = alpha < x < beta (ReLU6: hardtanh's backward)
//   Sigmoid      y = s(x) = 1 / (1 + exp(-x))          f' = s(x) (1 - s(x))
//   HardSigmoid  y = max(0, min(1, alpha*x + beta))     f' = 0 < alpha*x + beta < 1 ? alpha : 0
//   HardSwish    y = x * max(0, min(1, x/6 + 1/2))      f' = x < -3 ? 0 : x <= 3 ? x/3 + 1/2 : 1
//   Silu         y = x * s(x) (PyTorch's SiLU; ONNX graphs spell it Sigmoid + Mul)
//                                                       f' = s(x) (1 + x (1 - s(x)))
// act_value and act_derivative are the one definition the CPU kernels and the CUDA kernels (kernels/cuda/
// activation.cu) share; the sweep checks them against a double-precision oracle (tests/backend/oracles.h).
#pragma once
#include <cmath>
#include <cstddef>

#include "kernels/backend.h"
#include "kernels/host_device.h"

namespace cnn {

void relu_forward_cpu(size_t n, const float* x, float* y);
void relu_backward_cpu(size_t n, const float* y, const float* dy, float* dx);

CNN_HD float act_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
// Comparisons, not fminf/fmaxf: g++ calls libm for those (their NaN rule) instead of vectorising the loop; a
// NaN input stays NaN, for the non-finite guard.
CNN_HD float act_clamp(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// K: the ActKind, a template argument so that the kernels' loops hold no switch.
template <ActKind K>
CNN_HD float act_value(float x, float alpha, float beta) {
  switch (K) {
    case ActKind::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case ActKind::kClip: return act_clamp(x, alpha, beta);
    case ActKind::kSigmoid: return act_sigmoid(x);
    case ActKind::kHardSigmoid: return act_clamp(alpha * x + beta, 0.f, 1.f);
    case ActKind::kHardSwish: return x * act_clamp(x * (1.f / 6.f) + 0.5f, 0.f, 1.f);
    case ActKind::kSilu: return x * act_sigmoid(x);
  }
  return x;
}

template <ActKind K>
CNN_HD float act_derivative(float x, float alpha, float beta) {
  switch (K) {
    case ActKind::kLeakyRelu: return x > 0.f ? 1.f : alpha;
    case ActKind::kClip: return x > alpha && x < beta ? 1.f : 0.f;
    case ActKind::kSigmoid: {
      const float s = act_sigmoid(x);
      return s * (1.f - s);
    }
    case ActKind::kHardSigmoid: {
      const float z = alpha * x + beta;
      return z > 0.f && z < 1.f ? alpha : 0.f;
    }
    case ActKind::kHardSwish: return x < -3.f ? 0.f : x <= 3.f ? x * (1.f / 3.f) + 0.5f : 1.f;
    case ActKind::kSilu: {
      const float s = act_sigmoid(x);
      return s * (1.f + x * (1.f - s));
    }
  }
  return 1.f;
}

// The kind as a type, for act_dispatch.
template <ActKind K>
struct ActTag {
  static constexpr ActKind kind = K;
};

// Calls f(ActTag<k>()) (host code: the launchers): one instantiation of a kernel per kind, whose loop then
// holds no switch.
template <class F>
void act_dispatch(ActKind k, F&& f) {
  switch (k) {
    case ActKind::kLeakyRelu: return f(ActTag<ActKind::kLeakyRelu>());
    case ActKind::kClip: return f(ActTag<ActKind::kClip>());
    case ActKind::kSigmoid: return f(ActTag<ActKind::kSigmoid>());
    case ActKind::kHardSigmoid: return f(ActTag<ActKind::kHardSigmoid>());
    case ActKind::kHardSwish: return f(ActTag<ActKind::kHardSwish>());
    case ActKind::kSilu: return f(ActTag<ActKind::kSilu>());
  }
}

// y = f(x); dx = dy * f'(x), or dx += that when accumulate.
void activation_forward_cpu(const Activation& a, size_t n, const float* x, float* y);
void activation_backward_cpu(const Activation& a, size_t n, const float* x, const float* dy, float* dx,
                             bool accumulate);

}  // namespace cnn
