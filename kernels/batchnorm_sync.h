// Batch normalisation split at its per-channel sums, so that the sums can be added up across ranks between
// the halves (synchronised batch norm: N ranks normalise with the statistics of the whole global batch).
// x, dy, y, dx: [rows, c] (NHWC, rows = n*h*w). Statistics and sums are double [2c+1]:
//   stats = [sum x (c), sum x^2 (c), rows]      sums = [sum dy (c), sum dy*xhat (c), rows]
// The variance is the one-pass sum_sq/count - mean^2, in double: what a single allreduce can carry. Exact
// enough for normalisation inputs (it loses digits only where |mean| exceeds the standard deviation by 1e6).
#pragma once
#include <cmath>

#include "kernels/batchnorm_finalize.h"
#include "kernels/rng.h"  // CNN_HD

namespace cnn {

// Channel j of batchnorm_forward_from_stats: the batch statistics from the sums, then batchnorm_finalize.
CNN_HD void batchnorm_finalize_channel(int j, int c, const double* stats, const float* gamma, const float* beta,
                                       float eps, float momentum, float* save_mean, float* save_invstd,
                                       float* running_mean, float* running_var, float* scale, float* shift) {
  const double count = stats[2 * c];
  const double mean = stats[j] / count;
  batchnorm_finalize(count, mean, stats[c + j] / count - mean * mean, gamma[j], beta[j], eps, momentum,
                     &save_mean[j], &save_invstd[j], &running_mean[j], &running_var[j], &scale[j], &shift[j]);
}

void batchnorm_stats_cpu(int rows, int c, const float* x, double* stats);
// The forward pass of batchnorm_forward_train_cpu (same outputs) with the statistics of `stats`.
void batchnorm_forward_from_stats_cpu(int rows, int c, const float* x, const double* stats, const float* gamma,
                                      const float* beta, float eps, float momentum, float* y, float* save_mean,
                                      float* save_invstd, float* running_mean, float* running_var);
void batchnorm_backward_sums_cpu(int rows, int c, const float* x, const float* dy, const float* save_mean,
                                 const float* save_invstd, double* sums);
// dgamma += local[c+j], dbeta += local[j]; dx (nullable) from the global sums.
void batchnorm_backward_from_sums_cpu(int rows, int c, const float* x, const float* dy, const float* gamma,
                                      const float* save_mean, const float* save_invstd, const double* local_sums,
                                      const double* global_sums, float* dx, float* dgamma, float* dbeta);

}  // namespace cnn
