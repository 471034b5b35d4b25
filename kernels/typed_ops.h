// The Backend's ops for activations of any storage type: fp32 goes to the fp32 ops (unchanged), bf16 and fp16
// to the "Reduced precision" ops of backend.h. Layers call these, so they never branch on the precision
// (docs/mixed_precision.md). Activation-side tensors are void*/const void* of type t; fp32-only tensors
// (biases, parameter gradients, batch-norm parameters and statistics) keep float*. For fp32, w is the fp32
// parameter itself; for 16-bit types, its 16-bit copy.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

namespace typed_detail {
inline const float* f32(const void* p) { return static_cast<const float*>(p); }
inline float* f32(void* p) { return static_cast<float*>(p); }
}  // namespace typed_detail

inline void conv2d_forward(Backend& be, DType t, const ConvDesc& d, const void* x, const void* w, const float* b,
                           void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.conv2d_forward(d, f32(x), f32(w), b, f32(y));
  be.conv2d_forward_16(t, d, x, w, b, y);
}
inline void conv2d_backward_data(Backend& be, DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.conv2d_backward_data(d, f32(dy), f32(w), f32(dx));
  be.conv2d_backward_data_16(t, d, dy, w, dx);
}
inline void conv2d_backward_filter(Backend& be, DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                                   float* db) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.conv2d_backward_filter(d, f32(x), f32(dy), dw, db);
  be.conv2d_backward_filter_16(t, d, x, dy, dw, db);
}
inline void linear_forward(Backend& be, DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                           void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.linear_forward(m, k, n, f32(x), f32(w), b, f32(y));
  be.linear_forward_16(t, m, k, n, x, w, b, y);
}
inline void linear_backward_data(Backend& be, DType t, int m, int k, int n, const void* dy, const void* w,
                                 void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.linear_backward_data(m, k, n, f32(dy), f32(w), f32(dx));
  be.linear_backward_data_16(t, m, k, n, dy, w, dx);
}
inline void linear_backward_weight(Backend& be, DType t, int m, int k, int n, const void* x, const void* dy,
                                   float* dw, float* db) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.linear_backward_weight(m, k, n, f32(x), f32(dy), dw, db);
  be.linear_backward_weight_16(t, m, k, n, x, dy, dw, db);
}
inline void relu_forward(Backend& be, DType t, size_t n, const void* x, void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.relu_forward(n, f32(x), f32(y));
  be.relu_forward_16(t, n, x, y);
}
inline void relu_backward(Backend& be, DType t, size_t n, const void* y, const void* dy, void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.relu_backward(n, f32(y), f32(dy), f32(dx));
  be.relu_backward_16(t, n, y, dy, dx);
}
inline void maxpool_forward(Backend& be, DType t, const PoolDesc& d, const void* x, bool relu, void* y,
                            int32_t* argmax) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.maxpool_forward(d, f32(x), relu, f32(y), argmax);
  be.maxpool_forward_16(t, d, x, relu, y, argmax);
}
inline void maxpool_backward(Backend& be, DType t, const PoolDesc& d, const void* dy, const void* relu_y,
                             const int32_t* argmax, void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.maxpool_backward(d, f32(dy), f32(relu_y), argmax, f32(dx));
  be.maxpool_backward_16(t, d, dy, relu_y, argmax, dx);
}
inline void avgpool_forward(Backend& be, DType t, const PoolDesc& d, const void* x, void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.avgpool_forward(d, f32(x), f32(y));
  be.avgpool_forward_16(t, d, x, y);
}
inline void avgpool_backward(Backend& be, DType t, const PoolDesc& d, const void* dy, void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.avgpool_backward(d, f32(dy), f32(dx));
  be.avgpool_backward_16(t, d, dy, dx);
}
inline void softmax_xent(Backend& be, DType t, int n, int classes, const void* logits, const int32_t* labels,
                         float label_smoothing, float scale, void* dlogits, double* host_loss_sum,
                         int64_t* host_correct) {
  using typed_detail::f32;
  if (t == DType::kF32)
    return be.softmax_xent(n, classes, f32(logits), labels, label_smoothing, scale, f32(dlogits), host_loss_sum,
                           host_correct);
  be.softmax_xent_16(t, n, classes, logits, labels, label_smoothing, scale, dlogits, host_loss_sum, host_correct);
}
inline void softmax_xent_totals(Backend& be, DType t, int n, int classes, const void* logits, const int32_t* labels,
                                float label_smoothing, float scale, void* dlogits, LossTotals* totals) {
  using typed_detail::f32;
  if (t == DType::kF32)
    return be.softmax_xent_totals(n, classes, f32(logits), labels, label_smoothing, scale, f32(dlogits), totals);
  be.softmax_xent_totals_16(t, n, classes, logits, labels, label_smoothing, scale, dlogits, totals);
}
inline void batchnorm_forward_train(Backend& be, DType t, int rows, int c, const void* x, const void* residual,
                                    const float* gamma, const float* beta, float eps, float momentum, bool relu,
                                    void* y, uint32_t* relu_mask, float* save_mean, float* save_invstd,
                                    float* running_mean, float* running_var) {
  using typed_detail::f32;
  if (t == DType::kF32)
    return be.batchnorm_forward_train(rows, c, f32(x), f32(residual), gamma, beta, eps, momentum, relu, f32(y),
                                      relu_mask, save_mean, save_invstd, running_mean, running_var);
  be.batchnorm_forward_train_16(t, rows, c, x, residual, gamma, beta, eps, momentum, relu, y, relu_mask, save_mean,
                                save_invstd, running_mean, running_var);
}
inline void batchnorm_forward_infer(Backend& be, DType t, int rows, int c, const void* x, const void* residual,
                                    const float* gamma, const float* beta, const float* running_mean,
                                    const float* running_var, float eps, bool relu, void* y) {
  using typed_detail::f32;
  if (t == DType::kF32)
    return be.batchnorm_forward_infer(rows, c, f32(x), f32(residual), gamma, beta, running_mean, running_var, eps,
                                      relu, f32(y));
  be.batchnorm_forward_infer_16(t, rows, c, x, residual, gamma, beta, running_mean, running_var, eps, relu, y);
}
inline void batchnorm_backward(Backend& be, DType t, int rows, int c, const void* x, const uint32_t* relu_mask,
                               const void* dy, const float* gamma, const float* save_mean, const float* save_invstd,
                               void* dx, void* dresidual, float* dgamma, float* dbeta) {
  using typed_detail::f32;
  if (t == DType::kF32)
    return be.batchnorm_backward(rows, c, f32(x), relu_mask, f32(dy), gamma, save_mean, save_invstd, f32(dx),
                                 f32(dresidual), dgamma, dbeta);
  be.batchnorm_backward_16(t, rows, c, x, relu_mask, dy, gamma, save_mean, save_invstd, dx, dresidual, dgamma,
                           dbeta);
}
inline void dropout_forward(Backend& be, DType t, int n, size_t per_sample, const void* x, float p, uint64_t key,
                            const int64_t* ids, void* y, uint8_t* mask) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.dropout_forward(n, per_sample, f32(x), p, key, ids, f32(y), mask);
  be.dropout_forward_16(t, n, per_sample, x, p, key, ids, y, mask);
}
inline void dropout_backward(Backend& be, DType t, size_t count, float p, const void* dy, const uint8_t* mask,
                             void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.dropout_backward(count, p, f32(dy), mask, f32(dx));
  be.dropout_backward_16(t, count, p, dy, mask, dx);
}
inline void axpy(Backend& be, DType t, size_t n, float alpha, const void* x, void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.axpy(n, alpha, f32(x), f32(y));
  be.axpy_16(t, n, alpha, x, y);
}
inline void shortcut_pad_forward(Backend& be, DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                                 void* y) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.shortcut_pad_forward(n, h, w, c, stride, k, f32(x), f32(y));
  be.shortcut_pad_forward_16(t, n, h, w, c, stride, k, x, y);
}
inline void shortcut_pad_backward(Backend& be, DType t, int n, int h, int w, int c, int stride, int k,
                                  const void* dy, void* dx) {
  using typed_detail::f32;
  if (t == DType::kF32) return be.shortcut_pad_backward(n, h, w, c, stride, k, f32(dy), f32(dx));
  be.shortcut_pad_backward_16(t, n, h, w, c, stride, k, dy, dx);
}

}  // namespace cnn
