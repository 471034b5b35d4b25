// Batch normalisation over the channel (last, NHWC) dimension: x and y are [rows, C] with rows = N*H*W.
// Training: y = gamma * (x - mean_B) * invstd_B + beta with the biased batch variance; the running statistics
// move towards the batch ones by `momentum` (PyTorch convention: r = (1-momentum) r + momentum * batch), the
// running variance with the unbiased batch variance. Inference: the same with the running statistics.
// save_mean/save_invstd: [C], kept from the forward pass for the backward pass.
#pragma once

namespace cnn {

void batchnorm_forward_train_cpu(int rows, int c, const float* x, const float* gamma, const float* beta, float eps,
                                 float momentum, float* y, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var);
void batchnorm_forward_infer_cpu(int rows, int c, const float* x, const float* gamma, const float* beta,
                                 const float* running_mean, const float* running_var, float eps, float* y);
// dx is overwritten (may be null); dgamma += sum dy*xhat, dbeta += sum dy.
void batchnorm_backward_cpu(int rows, int c, const float* x, const float* dy, const float* gamma,
                            const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta);

}  // namespace cnn
