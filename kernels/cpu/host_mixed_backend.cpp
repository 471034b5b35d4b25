#include "kernels/cpu/host_mixed_backend.h"

#include "src/base/error.h"

namespace cnn {

namespace {

size_t conv_in(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t conv_out(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t conv_filter(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * d.c; }
size_t pool_in(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t pool_out(const PoolDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.c; }
size_t pad_out(int n, int h, int w, int stride, int k) {
  return static_cast<size_t>(n) * ((h + stride - 1) / stride) * ((w + stride - 1) / stride) * k;
}

}  // namespace

// The widened weights of a 16-bit op live in scratch, at the same address for every layer, so the fp32 op
// must not reuse what it derived from earlier weights at that address under the current parameter version
// (Backend::set_param_version: the fast CPU backend's cached filter layouts): version 0 for the call.
class FreshWeights {
 public:
  explicit FreshWeights(HostMixedBackend& be) : be_(be), version_(be.param_version_) {
    if (version_ != 0) be_.set_param_version(0);
  }
  ~FreshWeights() {
    if (version_ != 0) be_.set_param_version(version_);
  }
  FreshWeights(const FreshWeights&) = delete;
  FreshWeights& operator=(const FreshWeights&) = delete;

 private:
  HostMixedBackend& be_;
  uint64_t version_;
};

float* HostMixedBackend::widen(int slot, DType t, const void* x, size_t n) {
  CNN_CHECK(t != DType::kF32, "16-bit op called with fp32 data (dispatch through kernels/typed_ops.h)");
  float* s = scratch(slot, n);
  convert_host(threads_, n, t, x, DType::kF32, s);
  return s;
}

float* HostMixedBackend::scratch(int slot, size_t n) {
  std::vector<float>& v = scratch_[slot];
  if (v.size() < n) v.resize(n);
  return v.data();
}

void HostMixedBackend::narrow(DType t, const float* x, void* y, size_t n) {
  convert_host(threads_, n, DType::kF32, x, t, y);
}

void HostMixedBackend::convert(size_t n, DType from, const void* x, DType to, void* y) {
  convert_host(threads_, n, from, x, to, y);
}

void HostMixedBackend::conv2d_forward_16(DType t, const ConvDesc& d, const void* x, const void* w, const float* b,
                                         void* y) {
  FreshWeights fresh(*this);
  float* y32 = scratch(2, conv_out(d));
  conv2d_forward(d, widen(0, t, x, conv_in(d)), widen(1, t, w, conv_filter(d)), b, y32);
  narrow(t, y32, y, conv_out(d));
}

void HostMixedBackend::conv2d_backward_data_16(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) {
  FreshWeights fresh(*this);
  float* dx32 = scratch(2, conv_in(d));
  conv2d_backward_data(d, widen(0, t, dy, conv_out(d)), widen(1, t, w, conv_filter(d)), dx32);
  narrow(t, dx32, dx, conv_in(d));
}

void HostMixedBackend::conv2d_backward_filter_16(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                                                 float* db) {
  conv2d_backward_filter(d, widen(0, t, x, conv_in(d)), widen(1, t, dy, conv_out(d)), dw, db);
}

void HostMixedBackend::linear_forward_16(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                                         void* y) {
  FreshWeights fresh(*this);
  const size_t out = static_cast<size_t>(m) * n;
  float* y32 = scratch(2, out);
  linear_forward(m, k, n, widen(0, t, x, static_cast<size_t>(m) * k), widen(1, t, w, static_cast<size_t>(n) * k), b,
                 y32);
  narrow(t, y32, y, out);
}

void HostMixedBackend::linear_backward_data_16(DType t, int m, int k, int n, const void* dy, const void* w,
                                               void* dx) {
  FreshWeights fresh(*this);
  const size_t in = static_cast<size_t>(m) * k;
  float* dx32 = scratch(2, in);
  linear_backward_data(m, k, n, widen(0, t, dy, static_cast<size_t>(m) * n), widen(1, t, w, static_cast<size_t>(n) * k),
                       dx32);
  narrow(t, dx32, dx, in);
}

void HostMixedBackend::linear_backward_weight_16(DType t, int m, int k, int n, const void* x, const void* dy,
                                                 float* dw, float* db) {
  linear_backward_weight(m, k, n, widen(0, t, x, static_cast<size_t>(m) * k),
                         widen(1, t, dy, static_cast<size_t>(m) * n), dw, db);
}

void HostMixedBackend::relu_forward_16(DType t, size_t n, const void* x, void* y) {
  float* y32 = scratch(1, n);
  relu_forward(n, widen(0, t, x, n), y32);
  narrow(t, y32, y, n);
}

void HostMixedBackend::relu_backward_16(DType t, size_t n, const void* y, const void* dy, void* dx) {
  float* dx32 = scratch(2, n);
  relu_backward(n, widen(0, t, y, n), widen(1, t, dy, n), dx32);
  narrow(t, dx32, dx, n);
}

void HostMixedBackend::maxpool_forward_16(DType t, const PoolDesc& d, const void* x, bool relu, void* y,
                                          int32_t* argmax) {
  float* y32 = scratch(1, pool_out(d));
  maxpool_forward(d, widen(0, t, x, pool_in(d)), relu, y32, argmax);
  narrow(t, y32, y, pool_out(d));
}

void HostMixedBackend::maxpool_backward_16(DType t, const PoolDesc& d, const void* dy, const void* relu_y,
                                           const int32_t* argmax, void* dx) {
  float* dx32 = scratch(2, pool_in(d));
  maxpool_backward(d, widen(0, t, dy, pool_out(d)), relu_y ? widen(1, t, relu_y, pool_out(d)) : nullptr, argmax,
                   dx32);
  narrow(t, dx32, dx, pool_in(d));
}

void HostMixedBackend::avgpool_forward_16(DType t, const PoolDesc& d, const void* x, void* y) {
  float* y32 = scratch(1, pool_out(d));
  avgpool_forward(d, widen(0, t, x, pool_in(d)), y32);
  narrow(t, y32, y, pool_out(d));
}

void HostMixedBackend::avgpool_backward_16(DType t, const PoolDesc& d, const void* dy, void* dx) {
  float* dx32 = scratch(1, pool_in(d));
  avgpool_backward(d, widen(0, t, dy, pool_out(d)), dx32);
  narrow(t, dx32, dx, pool_in(d));
}

void HostMixedBackend::softmax_xent_16(DType t, int n, int classes, const void* logits, const int32_t* labels,
                                       float eps, float scale, void* dlogits, double* host_loss_sum,
                                       int64_t* host_correct) {
  const size_t count = static_cast<size_t>(n) * classes;
  float* d32 = dlogits ? scratch(1, count) : nullptr;
  softmax_xent(n, classes, widen(0, t, logits, count), labels, eps, scale, d32, host_loss_sum, host_correct);
  if (dlogits) narrow(t, d32, dlogits, count);
}

void HostMixedBackend::softmax_xent_totals_16(DType t, int n, int classes, const void* logits, const int32_t* labels,
                                              float eps, float scale, void* dlogits, LossTotals* totals) {
  const size_t count = static_cast<size_t>(n) * classes;
  float* d32 = dlogits ? scratch(1, count) : nullptr;
  softmax_xent_totals(n, classes, widen(0, t, logits, count), labels, eps, scale, d32, totals);
  if (dlogits) narrow(t, d32, dlogits, count);
}

void HostMixedBackend::batchnorm_forward_train_16(DType t, int rows, int c, const void* x, const void* residual,
                                                  const float* gamma, const float* beta, float eps, float momentum,
                                                  bool relu, void* y, uint32_t* relu_mask, float* save_mean,
                                                  float* save_invstd, float* running_mean, float* running_var) {
  const size_t count = static_cast<size_t>(rows) * c;
  float* y32 = scratch(2, count);
  batchnorm_forward_train(rows, c, widen(0, t, x, count), residual ? widen(1, t, residual, count) : nullptr, gamma,
                          beta, eps, momentum, relu, y32, relu_mask, save_mean, save_invstd, running_mean,
                          running_var);
  narrow(t, y32, y, count);
}

void HostMixedBackend::batchnorm_forward_infer_16(DType t, int rows, int c, const void* x, const void* residual,
                                                  const float* gamma, const float* beta, const float* running_mean,
                                                  const float* running_var, float eps, bool relu, void* y) {
  const size_t count = static_cast<size_t>(rows) * c;
  float* y32 = scratch(2, count);
  batchnorm_forward_infer(rows, c, widen(0, t, x, count), residual ? widen(1, t, residual, count) : nullptr, gamma,
                          beta, running_mean, running_var, eps, relu, y32);
  narrow(t, y32, y, count);
}

void HostMixedBackend::batchnorm_backward_16(DType t, int rows, int c, const void* x, const uint32_t* relu_mask,
                                             const void* dy, const float* gamma, const float* save_mean,
                                             const float* save_invstd, void* dx, void* dresidual, float* dgamma,
                                             float* dbeta) {
  const size_t count = static_cast<size_t>(rows) * c;
  float* dx32 = dx ? scratch(2, count) : nullptr;
  float* dr32 = dresidual ? scratch(3, count) : nullptr;
  batchnorm_backward(rows, c, widen(0, t, x, count), relu_mask, widen(1, t, dy, count), gamma, save_mean,
                     save_invstd, dx32, dr32, dgamma, dbeta);
  if (dx) narrow(t, dx32, dx, count);
  if (dresidual) narrow(t, dr32, dresidual, count);
}

void HostMixedBackend::dropout_forward_16(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key,
                                          const int64_t* ids, void* y, uint8_t* mask) {
  const size_t count = static_cast<size_t>(n) * per_sample;
  float* y32 = scratch(1, count);
  dropout_forward(n, per_sample, widen(0, t, x, count), p, key, ids, y32, mask);
  narrow(t, y32, y, count);
}

void HostMixedBackend::dropout_backward_16(DType t, size_t count, float p, const void* dy, const uint8_t* mask,
                                           void* dx) {
  float* dx32 = scratch(1, count);
  dropout_backward(count, p, widen(0, t, dy, count), mask, dx32);
  narrow(t, dx32, dx, count);
}


void HostMixedBackend::axpy_16(DType t, size_t n, float alpha, const void* x, void* y) {
  float* y32 = widen(1, t, y, n);
  axpy(n, alpha, widen(0, t, x, n), y32);
  narrow(t, y32, y, n);
}

void HostMixedBackend::shortcut_pad_forward_16(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                                               void* y) {
  const size_t out = pad_out(n, h, w, stride, k);
  float* y32 = scratch(1, out);
  shortcut_pad_forward(n, h, w, c, stride, k, widen(0, t, x, static_cast<size_t>(n) * h * w * c), y32);
  narrow(t, y32, y, out);
}

void HostMixedBackend::shortcut_pad_backward_16(DType t, int n, int h, int w, int c, int stride, int k,
                                                const void* dy, void* dx) {
  const size_t in = static_cast<size_t>(n) * h * w * c;
  float* dx32 = scratch(1, in);
  shortcut_pad_backward(n, h, w, c, stride, k, widen(0, t, dy, pad_out(n, h, w, stride, k)), dx32);
  narrow(t, dx32, dx, in);
}

}  // namespace cnn
