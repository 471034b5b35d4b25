#include <cmath>
#include <vector>

#include "kernels/batchnorm.h"

namespace cnn {

void batchnorm_forward_train_cpu(int rows, int c, const float* x, const float* gamma, const float* beta, float eps,
                                 float momentum, float* y, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var) {
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
  for (int j = 0; j < c; ++j) {
    const double biased = var[j] / rows;
    const double invstd = 1.0 / std::sqrt(biased + eps);
    save_mean[j] = static_cast<float>(mean[j]);
    save_invstd[j] = static_cast<float>(invstd);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    shift[j] = static_cast<float>(beta[j] - mean[j] * gamma[j] * invstd);
    const double unbiased = rows > 1 ? var[j] / (rows - 1) : biased;
    running_mean[j] = static_cast<float>((1.0 - momentum) * running_mean[j] + momentum * mean[j]);
    running_var[j] = static_cast<float>((1.0 - momentum) * running_var[j] + momentum * unbiased);
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      y[i] = x[i] * scale[j] + shift[j];
    }
}

void batchnorm_forward_infer_cpu(int rows, int c, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float eps, float* y) {
  std::vector<float> scale(c), shift(c);
  for (int j = 0; j < c; ++j) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[j]) + eps);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    shift[j] = static_cast<float>(beta[j] - running_mean[j] * gamma[j] * invstd);
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      y[i] = x[i] * scale[j] + shift[j];
    }
}

void batchnorm_backward_cpu(int rows, int c, const float* x, const float* dy, const float* gamma,
                            const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                            float* dbeta) {
  // Local sums first: dx needs this batch's sums, not the accumulated parameter gradients.
  std::vector<double> sdy(c, 0.0), sdyx(c, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      const double xhat = (x[i] - save_mean[j]) * static_cast<double>(save_invstd[j]);
      sdy[j] += dy[i];
      sdyx[j] += dy[i] * xhat;
    }
  for (int j = 0; j < c; ++j) {
    dgamma[j] += static_cast<float>(sdyx[j]);
    dbeta[j] += static_cast<float>(sdy[j]);
  }
  if (!dx) return;
  // dx = gamma*invstd/N * (N*dy - sum(dy) - xhat*sum(dy*xhat))
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
      dx[i] = k[j] * (dy[i] - mdy[j] - xhat * mxh[j]);
    }
}

}  // namespace cnn
