// The Backend's 16-bit ops (backend.h, "Reduced precision") for a backend whose memory the host addresses (the
// CPU backend derives from this): 16-bit inputs are widened into fp32 scratch, the backend's own fp32 op runs,
// and the 16-bit outputs are rounded back. Over the reference fp32 kernels this is the 16-bit oracle: by
// construction it computes the fp32 op on the widened inputs and rounds each output once, which is the
// contract every other 16-bit implementation is tested against. A derived backend overrides the ops it has
// native 16-bit kernels for (the CPU backend: convolution and matmul on oneDNN's bf16 primitives).
#pragma once
#include <vector>

#include "kernels/backend.h"

namespace cnn {

class HostMixedBackend : public Backend {
 public:
  // threads: for the conversions.
  explicit HostMixedBackend(int threads) : threads_(threads < 1 ? 1 : threads) {}

  // Remembered so that the ops below can suspend it: see FreshWeights in host_mixed_backend.cpp. A derived
  // backend that overrides it calls this one too.
  void set_param_version(uint64_t version) override { param_version_ = version; }
  void convert(size_t n, DType from, const void* x, DType to, void* y) override;
  void conv2d_forward_16(DType t, const ConvDesc& d, const void* x, const void* w, const float* b,
                         void* y) override;
  void conv2d_backward_data_16(DType t, const ConvDesc& d, const void* dy, const void* w, void* dx) override;
  void conv2d_backward_filter_16(DType t, const ConvDesc& d, const void* x, const void* dy, float* dw,
                                 float* db) override;
  void linear_forward_16(DType t, int m, int k, int n, const void* x, const void* w, const float* b,
                         void* y) override;
  void linear_backward_data_16(DType t, int m, int k, int n, const void* dy, const void* w, void* dx) override;
  void linear_backward_weight_16(DType t, int m, int k, int n, const void* x, const void* dy, float* dw,
                                 float* db) override;
  void relu_forward_16(DType t, size_t n, const void* x, void* y) override;
  void relu_backward_16(DType t, size_t n, const void* y, const void* dy, void* dx) override;
  void maxpool_forward_16(DType t, const PoolDesc& d, const void* x, bool relu, void* y, int32_t* argmax) override;
  void maxpool_backward_16(DType t, const PoolDesc& d, const void* dy, const void* relu_y, const int32_t* argmax,
                           void* dx) override;
  void avgpool_forward_16(DType t, const PoolDesc& d, const void* x, void* y) override;
  void avgpool_backward_16(DType t, const PoolDesc& d, const void* dy, void* dx) override;
  void softmax_xent_16(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps,
                       float scale, void* dlogits, double* host_loss_sum, int64_t* host_correct) override;
  void softmax_xent_totals_16(DType t, int n, int classes, const void* logits, const int32_t* labels, float eps,
                              float scale, void* dlogits, LossTotals* totals) override;
  void batchnorm_forward_train_16(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                                  const float* beta, float eps, float momentum, bool relu, void* y,
                                  uint32_t* relu_mask, float* save_mean, float* save_invstd, float* running_mean,
                                  float* running_var) override;
  void batchnorm_forward_infer_16(DType t, int rows, int c, const void* x, const void* residual, const float* gamma,
                                  const float* beta, const float* running_mean, const float* running_var, float eps,
                                  bool relu, void* y) override;
  void batchnorm_backward_16(DType t, int rows, int c, const void* x, const uint32_t* relu_mask, const void* dy,
                             const float* gamma, const float* save_mean, const float* save_invstd, void* dx,
                             void* dresidual, float* dgamma, float* dbeta) override;
  void dropout_forward_16(DType t, int n, size_t per_sample, const void* x, float p, uint64_t key,
                          const int64_t* ids, void* y, uint8_t* mask) override;
  void dropout_backward_16(DType t, size_t count, float p, const void* dy, const uint8_t* mask, void* dx) override;
  void axpy_16(DType t, size_t n, float alpha, const void* x, void* y) override;
  void shortcut_pad_forward_16(DType t, int n, int h, int w, int c, int stride, int k, const void* x,
                               void* y) override;
  void shortcut_pad_backward_16(DType t, int n, int h, int w, int c, int stride, int k, const void* dy,
                                void* dx) override;

 protected:
  // fp32 scratch `slot` (0..3) holding x (n elements of type t) widened; grown on demand, so nothing is
  // allocated per call after warm-up. Ops run one at a time on a backend, so the slots are not shared.
  float* widen(int slot, DType t, const void* x, size_t n);
  float* scratch(int slot, size_t n);
  // y (n elements of t) = x rounded.
  void narrow(DType t, const float* x, void* y, size_t n);

  int threads_;

 private:
  friend class FreshWeights;
  uint64_t param_version_ = 0;
  std::vector<float> scratch_[4];
};

}  // namespace cnn
