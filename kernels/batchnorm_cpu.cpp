#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernels/batchnorm.h"
#include "kernels/batchnorm_finalize.h"

namespace cnn {

namespace {

// y = act(x * scale + shift + residual), row by row; the ReLU's mask bits when mask is not null.
void apply(int rows, int c, const float* x, const float* residual, const std::vector<float>& scale,
           const std::vector<float>& shift, BnAct act, float* y, uint32_t* mask) {
  if (mask) std::fill(mask, mask + relu_mask_words(static_cast<size_t>(rows) * c), 0u);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      float v = x[i] * scale[j] + shift[j];
      if (residual) v += residual[i];
      const bool pass = v > 0.f && !(act.capped && v >= act.cap);
      y[i] = !act.relu ? v : !(v > 0.f) ? 0.f : act.capped && v >= act.cap ? act.cap : v;
      if (mask && pass) mask[i / 32] |= 1u << (i % 32);
    }
}

}  // namespace

void batchnorm_forward_train_cpu(int rows, int c, const float* x, const float* residual, const float* gamma,
                                 const float* beta, float eps, float momentum, BnAct act, float* y,
                                 uint32_t* relu_mask, float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var) {
  // Two passes in double: the one-pass E[x^2]-E[x]^2 form loses the variance of large-mean channels.
  std::vector<double> mean(c, 0.0), var(c, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) mean[j] += x[static_cast<size_t>(r) * c + j];
  for (int j = 0; j < c; ++j) mean[j] /= rows;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const double d = x[static_cast<size_t>(r) * c + j] - mean[j];
      var[j] += d * d;
    }
  std::vector<float> scale(c), shift(c);
  for (int j = 0; j < c; ++j)
    batchnorm_finalize(rows, mean[j], var[j] / rows, gamma[j], beta[j], eps, momentum, &save_mean[j],
                       &save_invstd[j], &running_mean[j], &running_var[j], &scale[j], &shift[j]);
  apply(rows, c, x, residual, scale, shift, act, y, act.relu ? relu_mask : nullptr);
}

void batchnorm_forward_infer_cpu(int rows, int c, const float* x, const float* residual, const float* gamma,
                                 const float* beta, const float* running_mean, const float* running_var, float eps,
                                 BnAct act, float* y) {
  std::vector<float> scale(c), shift(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[j]) + eps);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    shift[j] = static_cast<float>(beta[j] - running_mean[j] * gamma[j] * invstd);
  }
  apply(rows, c, x, residual, scale, shift, act, y, nullptr);
}

void batchnorm_backward_cpu(int rows, int c, const float* x, const uint32_t* relu_mask, const float* dy,
                            const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                            float* dresidual, float* dgamma, float* dbeta) {
  auto grad = [&](size_t i) { return relu_mask && !(relu_mask[i / 32] >> (i % 32) & 1u) ? 0.f : dy[i]; };
  // Local sums first: dx needs this batch's sums, not the accumulated parameter gradients.
  std::vector<double> sdy(c, 0.0), sdyx(c, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      const double xhat = (x[i] - save_mean[j]) * static_cast<double>(save_invstd[j]);
      const float g = grad(i);
      sdy[j] += g;
      sdyx[j] += g * xhat;
    }
  for (int j = 0; j < c; ++j) {
    dgamma[j] += static_cast<float>(sdyx[j]);
    dbeta[j] += static_cast<float>(sdy[j]);
  }
  if (dresidual)
    for (size_t i = 0; i < static_cast<size_t>(rows) * c; ++i) dresidual[i] = grad(i);
  if (!dx) return;
  // dx = gamma*invstd/N * (N*g - sum(g) - xhat*sum(g*xhat))
  std::vector<float> k(c), mdy(c), mxh(c);
  for (int j = 0; j < c; ++j) {
    k[j] = gamma[j] * save_invstd[j];
    mdy[j] = static_cast<float>(sdy[j] / rows);
    mxh[j] = static_cast<float>(sdyx[j] / rows);
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      const float xhat = (x[i] - save_mean[j]) * save_invstd[j];
      dx[i] = k[j] * (grad(i) - mdy[j] - xhat * mxh[j]);
    }
}

}  // namespace cnn
