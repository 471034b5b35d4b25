#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/batchnorm_sync.h"

namespace cnn {

void batchnorm_stats_cpu(int rows, int c, const float* x, double* stats) {
  std::fill(stats, stats + 2 * c, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const double v = x[static_cast<size_t>(r) * c + j];
      stats[j] += v;
      stats[c + j] += v * v;
    }
  stats[2 * c] = rows;
}

void batchnorm_forward_from_stats_cpu(int rows, int c, const float* x, const double* stats, const float* gamma,
                                      const float* beta, float eps, float momentum, float* y, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var) {
  std::vector<float> scale(c), shift(c);
  for (int j = 0; j < c; ++j)
    batchnorm_finalize_channel(j, c, stats, gamma, beta, eps, momentum, save_mean, save_invstd, running_mean,
                               running_var, scale.data(), shift.data());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      y[i] = x[i] * scale[j] + shift[j];
    }
}

void batchnorm_backward_sums_cpu(int rows, int c, const float* x, const float* dy, const float* save_mean,
                                 const float* save_invstd, double* sums) {
  std::fill(sums, sums + 2 * c, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      const double xhat = (x[i] - save_mean[j]) * static_cast<double>(save_invstd[j]);
      sums[j] += dy[i];
      sums[c + j] += dy[i] * xhat;
    }
  sums[2 * c] = rows;
}

void batchnorm_backward_from_sums_cpu(int rows, int c, const float* x, const float* dy, const float* gamma,
                                      const float* save_mean, const float* save_invstd, const double* local_sums,
                                      const double* global_sums, float* dx, float* dgamma, float* dbeta) {
  for (int j = 0; j < c; ++j) {
    dgamma[j] += static_cast<float>(local_sums[c + j]);
    dbeta[j] += static_cast<float>(local_sums[j]);
  }
  if (!dx) return;
  const double count = global_sums[2 * c];
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) {
      const size_t i = static_cast<size_t>(r) * c + j;
      const float k = gamma[j] * save_invstd[j];
      const float mean_dy = static_cast<float>(global_sums[j] / count);
      const float mean_dyx = static_cast<float>(global_sums[c + j] / count);
      const float xhat = (x[i] - save_mean[j]) * save_invstd[j];
      dx[i] = k * (dy[i] - mean_dy - xhat * mean_dyx);
    }
}

}  // namespace cnn
