// The per-channel end of batch-norm training statistics, shared by every kernel that computes them (the CPU
// reference, the fast CPU kernel, the CUDA kernels, synchronised batch norm), so all of them round alike.
#pragma once
#include <cmath>

#include "kernels/rng.h"  // CNN_HD

namespace cnn {

// From the batch mean and biased variance (clamped at 0) over `count` values: the saved mean and inverse
// standard deviation, the running statistics (momentum update with the unbiased variance) and the affine map
// y = x * scale + shift, each computed in double and rounded once.
CNN_HD void batchnorm_finalize(double count, double mean, double var, float gamma, float beta, float eps,
                               float momentum, float* save_mean, float* save_invstd, float* running_mean,
                               float* running_var, float* scale, float* shift) {
  const double biased = var > 0.0 ? var : 0.0;
  const double invstd = 1.0 / sqrt(biased + eps);
  *save_mean = static_cast<float>(mean);
  *save_invstd = static_cast<float>(invstd);
  *scale = static_cast<float>(gamma * invstd);
  *shift = static_cast<float>(beta - mean * gamma * invstd);
  const double unbiased = count > 1 ? biased * count / (count - 1) : biased;
  *running_mean = static_cast<float>((1.0 - momentum) * *running_mean + momentum * mean);
  *running_var = static_cast<float>((1.0 - momentum) * *running_var + momentum * unbiased);
}

}  // namespace cnn
