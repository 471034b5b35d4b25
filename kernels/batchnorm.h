// Batch normalisation over the channel (last, NHWC) dimension: x and y are [rows, C] with rows = N*H*W.
// Training: y = gamma * (x - mean_B) * invstd_B + beta with the biased batch variance; the running statistics
// move towards the batch ones by `momentum` (PyTorch convention: r = (1-momentum) r + momentum * batch), the
// running variance with the unbiased batch variance. Inference: the same with the running statistics.
// save_mean/save_invstd: [C], kept from the forward pass for the backward pass.
// Fused epilogue (Backend::batchnorm_*): y = act(bn(x) + residual), residual [rows, C] nullable, act a BnAct
// (none, ReLU or capped ReLU); with a ReLU training records where it passes the gradient (v > 0, and v < cap
// when capped) in relu_mask (bit i % 32 of word i / 32), and the backward masks dy with it and can hand that
// masked gradient to the residual.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

void batchnorm_forward_train_cpu(int rows, int c, const float* x, const float* residual, const float* gamma,
                                 const float* beta, float eps, float momentum, BnAct act, float* y,
                                 uint32_t* relu_mask, float* save_mean, float* save_invstd, float* running_mean,
                                 float* running_var);
void batchnorm_forward_infer_cpu(int rows, int c, const float* x, const float* residual, const float* gamma,
                                 const float* beta, const float* running_mean, const float* running_var, float eps,
                                 BnAct act, float* y);
// relu_mask: the forward's, or null (no ReLU). dx and dresidual are overwritten (each may be null);
// dgamma += sum g*xhat, dbeta += sum g, g = dy masked.
void batchnorm_backward_cpu(int rows, int c, const float* x, const uint32_t* relu_mask, const float* dy,
                            const float* gamma, const float* save_mean, const float* save_invstd, float* dx,
                            float* dresidual, float* dgamma, float* dbeta);

}  // namespace cnn
