// Multithreaded (OpenMP) element-wise, pooling, batch-norm and optimizer kernels of the fast CPU backend.
// Same semantics as the reference kernels in activation.h, pooling.h, batchnorm.h, elementwise.h and
// optimizer.h; work is split statically over `threads`, each output element is computed by one thread in a
// fixed order and reductions add fixed partial sums in a fixed order, so results do not depend on scheduling
// (and are the same for any thread count).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

void fill_fast(int threads, float* x, size_t n, float v);
void relu_forward_fast(int threads, size_t n, const float* x, float* y);
void relu_backward_fast(int threads, size_t n, const float* y, const float* dy, float* dx);
void maxpool_forward_fast(int threads, const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax);
void maxpool_backward_fast(int threads, const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax,
                           float* dx);
// kernels/cpu/batchnorm_fast.cpp
void batchnorm_forward_train_fast(int threads, int rows, int c, const float* x, const float* residual,
                                  const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                  float* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                  float* running_mean, float* running_var);
void batchnorm_forward_infer_fast(int threads, int rows, int c, const float* x, const float* residual,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float eps, BnAct act, float* y);
void batchnorm_backward_fast(int threads, int rows, int c, const float* x, const uint32_t* relu_mask,
                             const float* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                             float* dx, float* dresidual, float* dgamma, float* dbeta);
// The same on bf16 tensors (statistics, parameters and their gradients fp32): the bits of widening, the fp32
// kernel and rounding once, without the conversion passes.
void batchnorm_forward_train_fast(int threads, int rows, int c, const Bf16* x, const Bf16* residual,
                                  const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                  Bf16* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                  float* running_mean, float* running_var);
void batchnorm_forward_infer_fast(int threads, int rows, int c, const Bf16* x, const Bf16* residual,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float eps, BnAct act, Bf16* y);
void batchnorm_backward_fast(int threads, int rows, int c, const Bf16* x, const uint32_t* relu_mask,
                             const Bf16* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                             Bf16* dx, Bf16* dresidual, float* dgamma, float* dbeta);
// kernels/cpu/batchnorm_blocked.cpp: the same (fp32) over [n, hw, c] activations with x and dx in layout s.x,
// y and dy in s.y, the residual and its gradient in s.residual; c a multiple of 16 unless all are NHWC (else
// throws). The ReLU mask's bit order is its own (see the file); a backward takes its forward's mask.
void batchnorm_forward_train_layout(int threads, const BnShape& s, const float* x, const float* residual,
                                    const float* gamma, const float* beta, float eps, float momentum, BnAct act,
                                    float* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                    float* running_mean, float* running_var);
void batchnorm_forward_infer_layout(int threads, const BnShape& s, const float* x, const float* residual,
                                    const float* gamma, const float* beta, const float* running_mean,
                                    const float* running_var, float eps, BnAct act, float* y);
void batchnorm_backward_layout(int threads, const BnShape& s, const float* x, const uint32_t* relu_mask,
                               const float* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                               float* dx, float* dresidual, float* dgamma, float* dbeta);
void sgd_update_fast(int threads, size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                     bool nesterov);

void adamw_update_fast(int threads, size_t n, float* w, const float* g, float* m, float* v, float lr, float beta1,
                       float beta2, float eps, float wd, float bc1, float bc2);
void axpy_fast(int threads, size_t n, float alpha, const float* x, float* y);
void axpy_fast(int threads, size_t n, float alpha, const Bf16* x, Bf16* y);  // no conversion passes
void scale_fast(int threads, size_t n, float alpha, float* x);
// Deterministic for any thread count (fixed chunks, summed in order), not the reference's summation order.
double sum_squares_fast(int threads, size_t n, const float* x);
void shortcut_pad_forward_fast(int threads, int n, int h, int w, int c, int stride, int k, const float* x, float* y);
void shortcut_pad_backward_add_fast(int threads, int n, int h, int w, int c, int stride, int k, const float* dy,
                                    float* dx);
void avgpool_forward_fast(int threads, const PoolDesc& d, const float* x, float* y);
void avgpool_backward_fast(int threads, const PoolDesc& d, const float* dy, float* dx);
void dropout_forward_fast(int threads, int n, size_t per_sample, const float* x, float p, uint64_t key,
                          const int64_t* ids, float* y, uint8_t* mask);
void dropout_backward_fast(int threads, size_t count, float p, const float* dy, const uint8_t* mask, float* dx);

}  // namespace cnn
