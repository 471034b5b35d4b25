// Host-side launchers of the custom CUDA kernels (kernels/cuda/*.cu), for the CUDA backend. Each enqueues
// its kernels on `stream` and returns the launch error; the math and layouts are those of the CPU reference
// in the op family's header (conv2d.h, linear.h, pooling.h, activation.h, loss.h, optimizer.h). All
// pointers are device pointers. Built twice (see cuda_common.h): cnn::gpu:: with nvcc, cnn::emu:: with the
// SIMT emulator. Element counts of one tensor must stay below 2^31.
//
// Storage types as in backend.h ("Ops on activations"): `t` is the type of every void* tensor, float*
// tensors (biases, parameter gradients, batch-norm parameters and statistics) are fp32. One kernel template
// per op serves every type (cuda_dtype.cuh): loads widen to fp32, arithmetic is fp32, each 16-bit store
// rounds once. 16-bit convolution and matmul run on tensor cores (wmma, fp32 accumulators) with the SIMT
// tile kernel as the portable path (gemm_wmma.cuh); fp32 runs on the SIMT tile kernel.
#pragma once
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/dtype.h"

namespace cnn {
namespace CNN_CUDA_NS {

// cuda/conv2d.cu: implicit GEMM, shared-memory tiles, no im2col buffer.
cudaError_t conv2d_forward_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_w, const float* d_b,
                                void* d_y, cudaStream_t stream);
cudaError_t conv2d_backward_data_cuda(DType t, const ConvDesc& d, const void* d_dy, const void* d_w, void* d_dx,
                                      cudaStream_t stream);
// d_dw += dL/dw (split-K partial sums meet in atomicAdd), d_db += dL/db (nullable).
cudaError_t conv2d_backward_filter_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream);
// cuda/conv2d_depthwise.cu: depthwise convolution (groups == c, k a multiple of c), which the launchers above
// hand over to; one thread per output or input element, the filter gradient without the bias gradient.
cudaError_t depthwise_forward_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_w, const float* d_b,
                                   void* d_y, cudaStream_t stream);
cudaError_t depthwise_backward_data_cuda(DType t, const ConvDesc& d, const void* d_dy, const void* d_w, void* d_dx,
                                         cudaStream_t stream);
cudaError_t depthwise_backward_filter_cuda(DType t, const ConvDesc& d, const void* d_x, const void* d_dy,
                                           float* d_dw, cudaStream_t stream);

// cuda/linear.cu: tiled matmul. x: [m,k], w: [n,k], y: [m,n].
cudaError_t linear_forward_cuda(DType t, int m, int k, int n, const void* d_x, const void* d_w, const float* d_b,
                                void* d_y, cudaStream_t stream);
cudaError_t linear_backward_data_cuda(DType t, int m, int k, int n, const void* d_dy, const void* d_w, void* d_dx,
                                      cudaStream_t stream);
cudaError_t linear_backward_weight_cuda(DType t, int m, int k, int n, const void* d_x, const void* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream);
// d_sums[c] += sum over rows of d_x[rows, cols] (bias gradients of linear and conv layers).
cudaError_t column_sum_cuda(DType t, int rows, int cols, const void* d_x, float* d_sums, cudaStream_t stream);

// cuda/activation.cu: element-wise, grid-stride loops.
cudaError_t fill_cuda(size_t n, float value, float* d_x, cudaStream_t stream);
cudaError_t relu_forward_cuda(DType t, size_t n, const void* d_x, void* d_y, cudaStream_t stream);
cudaError_t relu_backward_cuda(DType t, size_t n, const void* d_y, const void* d_dy, void* d_dx,
                               cudaStream_t stream);
// fp32 <-> 16-bit conversion (or a copy for equal types).
cudaError_t convert_cuda(size_t n, DType from, const void* d_x, DType to, void* d_y, cudaStream_t stream);
// d_y[i] += d_x[i] widened from the 16-bit t: a 16-bit partial result joining an fp32 accumulator.
cudaError_t add_widened_cuda(DType t, size_t n, const void* d_x, float* d_y, cudaStream_t stream);

// cuda/pooling.cu. The backward pass gathers (each input sums the outputs that chose it) instead of
// scattering, so it needs neither atomics nor a zeroing pass and sums in the CPU reference's order. relu:
// the pooling of a ReLU's output (Backend::maxpool_forward); d_relu_y: that forward's y, or null.
cudaError_t maxpool_forward_cuda(DType t, const PoolDesc& d, const void* d_x, bool relu, void* d_y,
                                 int32_t* d_argmax, cudaStream_t stream);
cudaError_t maxpool_backward_cuda(DType t, const PoolDesc& d, const void* d_dy, const void* d_relu_y,
                                  const int32_t* d_argmax, void* d_dx, cudaStream_t stream);

// cuda/loss.cu: one warp per row; d_loss_sum += sum of the n losses, d_correct += rows whose arg-max is the
// label (block reductions, one atomic per block). d_dlogits nullable.
cudaError_t softmax_xent_cuda(DType t, int n, int classes, const void* d_logits, const int32_t* d_labels, float eps,
                              float scale, void* d_dlogits, double* d_loss_sum, unsigned long long* d_correct,
                              cudaStream_t stream);
// The soft target of a mixed batch (kernels/loss.h: softmax_xent_mix_cpu); d_mix: [n]. Correct: arg-max == label.
cudaError_t softmax_xent_mix_cuda(DType t, int n, int classes, const void* d_logits, const int32_t* d_labels,
                                  const MixDraw* d_mix, float eps, float scale, void* d_dlogits, double* d_loss_sum,
                                  unsigned long long* d_correct, cudaStream_t stream);
// cuda/mix_images.cu: mixup/cutmix of the fp32 batch d_x [n, h, w, c] in place, one thread per element of a
// pair (kernels/mix_images.h); n even, d_draws: [n].
cudaError_t mix_images_cuda(int n, int h, int w, int c, const MixDraw* d_draws, float* d_x, cudaStream_t stream);

// cuda/optimizer.cu: fused SGD momentum / Nesterov with L2 weight decay, one pass over w, g, v. The update
// does nothing when d_gate is not null and *d_gate != 0 (Backend::set_update_gate).
cudaError_t sgd_update_cuda(size_t n, float* d_w, const float* d_g, float* d_v, float lr, float momentum, float wd,
                            bool nesterov, cudaStream_t stream, const int64_t* d_gate = nullptr);

// --- The layer set beyond the basics, same semantics as the CPU references (batchnorm.h, dropout.h,
// pooling.h, elementwise.h, optimizer.h). ---

// cuda/batchnorm.cu; x, y, residual: [rows, c]. d_work: batchnorm_work_bytes(c) of device scratch. The fused
// epilogue y = act(bn(x) + residual) and its backward as in kernels/batchnorm.h.
size_t batchnorm_work_bytes(int c);
cudaError_t batchnorm_forward_train_cuda(DType t, int rows, int c, const void* d_x, const void* d_residual,
                                         const float* d_gamma, const float* d_beta, float eps, float momentum,
                                         BnAct act, void* d_y, uint32_t* d_relu_mask, float* d_save_mean,
                                         float* d_save_invstd, float* d_running_mean, float* d_running_var,
                                         void* d_work, cudaStream_t stream);
cudaError_t batchnorm_forward_infer_cuda(DType t, int rows, int c, const void* d_x, const void* d_residual,
                                         const float* d_gamma, const float* d_beta, const float* d_running_mean,
                                         const float* d_running_var, float eps, BnAct act, void* d_y, void* d_work,
                                         cudaStream_t stream);
// d_dgamma += sum g*xhat, d_dbeta += sum g (g = dy, masked by the forward's d_relu_mask unless it is null);
// d_dx and d_dresidual (= g) overwritten, each nullable.
cudaError_t batchnorm_backward_cuda(DType t, int rows, int c, const void* d_x, const uint32_t* d_relu_mask,
                                    const void* d_dy, const float* d_gamma, const float* d_save_mean,
                                    const float* d_save_invstd, void* d_dx, void* d_dresidual, float* d_dgamma,
                                    float* d_dbeta, void* d_work, cudaStream_t stream);
// Synchronised batch norm (kernels/batchnorm_sync.h; also cuda/batchnorm.cu): d_stats and d_sums are
// double [2c+1]; d_work as above.
cudaError_t batchnorm_stats_cuda(int rows, int c, const float* d_x, double* d_stats, cudaStream_t stream);
cudaError_t batchnorm_forward_from_stats_cuda(int rows, int c, const float* d_x, const double* d_stats,
                                              const float* d_gamma, const float* d_beta, float eps, float momentum,
                                              float* d_y, float* d_save_mean, float* d_save_invstd,
                                              float* d_running_mean, float* d_running_var, void* d_work,
                                              cudaStream_t stream);
cudaError_t batchnorm_backward_sums_cuda(int rows, int c, const float* d_x, const float* d_dy,
                                         const float* d_save_mean, const float* d_save_invstd, double* d_sums,
                                         cudaStream_t stream);
cudaError_t batchnorm_backward_from_sums_cuda(int rows, int c, const float* d_x, const float* d_dy,
                                              const float* d_gamma, const float* d_save_mean,
                                              const float* d_save_invstd, const double* d_local,
                                              const double* d_global, float* d_dx, float* d_dgamma, float* d_dbeta,
                                              void* d_work, cudaStream_t stream);

// cuda/dropout.cu; the keep bits are the CPU reference's (counter-based hash of key, sample id, index).
cudaError_t dropout_forward_cuda(DType t, int n, size_t per_sample, const void* d_x, float p, uint64_t key,
                                 const int64_t* d_ids, void* d_y, uint8_t* d_mask, cudaStream_t stream);
cudaError_t dropout_backward_cuda(DType t, size_t count, float p, const void* d_dy, const uint8_t* d_mask, void* d_dx,
                                  cudaStream_t stream);

// cuda/pooling.cu: average pooling, padding excluded from the count; global pooling is r = h, s = w.
cudaError_t avgpool_forward_cuda(DType t, const PoolDesc& d, const void* d_x, void* d_y, cudaStream_t stream);
cudaError_t avgpool_backward_cuda(DType t, const PoolDesc& d, const void* d_dy, void* d_dx, cudaStream_t stream);

// cuda/elementwise.cu. sum_squares adds sum(x^2) (in double) to *d_sum.
cudaError_t axpy_cuda(DType t, size_t n, float alpha, const void* d_x, void* d_y, cudaStream_t stream);
cudaError_t scale_cuda(size_t n, float alpha, float* d_x, cudaStream_t stream);
cudaError_t sum_squares_cuda(size_t n, const float* d_x, double* d_sum, cudaStream_t stream);
cudaError_t shortcut_pad_forward_cuda(DType t, int n, int h, int w, int c, int stride, int k, const void* d_x,
                                      void* d_y, cudaStream_t stream);
cudaError_t shortcut_pad_backward_add_cuda(DType t, int n, int h, int w, int c, int stride, int k, const void* d_dy,
                                           void* d_dx, cudaStream_t stream);

// cuda/optimizer.cu: AdamW, decoupled weight decay; bc1, bc2 = bias corrections 1 - beta^t. Gated like SGD.
cudaError_t adamw_update_cuda(size_t n, float* d_w, const float* d_g, float* d_m, float* d_v, float lr, float beta1,
                              float beta2, float eps, float wd, float bc1, float bc2, cudaStream_t stream,
                              const int64_t* d_gate = nullptr);

// cuda/nonfinite.cu: d_stats[0] += count of NaN/inf in d_x, d_stats[1] = max(d_stats[1], base + last index + 1)
// (kernels/nonfinite.h).
cudaError_t count_nonfinite_cuda(size_t n, const float* d_x, int64_t base, int64_t* d_stats, cudaStream_t stream);

// cuda/image_prep.cu: d_x as prepare_images_cpu (kernels/image_prep.h) computes it, from device copies of the
// pixels and augmentation (d_aug nullable); d_scale_shift [2c] = 1/std, then -mean/std. d_means: [n] scratch
// for the contrast's mean grey levels, non-null (with d_aug) when some sample's contrast factor is not 1.
cudaError_t prepare_images_cuda(int n, int h, int w, int c, const uint8_t* d_pixels, const ImageAug* d_aug,
                                float* d_means, const float* d_scale_shift, float* d_x, cudaStream_t stream);

// cuda/activation.cu: the parameterised activations (kernels/activation.h), grid-stride loops; the
// backward reads the forward's input d_x and overwrites d_dx, or adds to it when accumulate.
cudaError_t activation_forward_cuda(DType t, const Activation& a, size_t n, const void* d_x, void* d_y,
                                    cudaStream_t stream);
cudaError_t activation_backward_cuda(DType t, const Activation& a, size_t n, const void* d_x, const void* d_dy,
                                     void* d_dx, bool accumulate, cudaStream_t stream);
// cuda/join.cu (kernels/join.h): add; the squeeze-excitation / same-shape mul, whose channel sums ds take one
// thread per (sample, channel) looping over hw in the reference's order (no atomics, deterministic); one
// input's slice of a channel concatenation, copied in (y's rows `stride` wide, at channel `offset`) or out.
cudaError_t add_forward_cuda(DType t, size_t n, const void* d_a, const void* d_b, void* d_y, cudaStream_t stream);
cudaError_t mul_forward_cuda(DType t, int n, int hw, int c, const void* d_x, const void* d_s, void* d_y,
                             cudaStream_t stream);
cudaError_t mul_backward_cuda(DType t, int n, int hw, int c, const void* d_x, const void* d_s, const void* d_dy,
                              void* d_dx, void* d_ds, bool accumulate, cudaStream_t stream);
cudaError_t concat_copy_in_cuda(DType t, int rows, int width, int stride, int offset, const void* d_x, void* d_y,
                                cudaStream_t stream);
cudaError_t concat_copy_out_cuda(DType t, int rows, int width, int stride, int offset, const void* d_dy, void* d_dx,
                                 bool accumulate, cudaStream_t stream);

}  // namespace CNN_CUDA_NS
}  // namespace cnn
