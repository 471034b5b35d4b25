// cuDNN batch normalisation for the CUDA backend (nvcc builds only), same semantics as kernels/batchnorm.h:
// x, y [rows, c] (NHWC with the pixels flattened; cuDNN sees [n, h, 1, c] with n*h = rows inside its limits on N,
// kernels/cuda/vendor/algo_select.h), statistics per channel, biased batch variance for
// normalising, unbiased for the running variance, saved mean and 1/sqrt(var + eps) for backward, and the
// parameter gradients accumulating (beta = 1). cuDNN's spatial-persistent NHWC kernels read x once per pass
// where the custom kernels make a separate reduction pass per statistic. Returns false when cuDNN refuses
// the problem (a single row in training, a shape past its limits, an "unsupported" status: the caller runs the
// custom kernel; the fallback log names the layer once).
#pragma once
#include <cudnn.h>

#include <memory>

#include "kernels/cuda/vendor/vendor_context.h"

namespace cnn {
namespace gpu {

class CudnnBatchNorm {
 public:
  CudnnBatchNorm(VendorContext& ctx, cudnnHandle_t handle);
  ~CudnnBatchNorm();
  CudnnBatchNorm(const CudnnBatchNorm&) = delete;
  CudnnBatchNorm& operator=(const CudnnBatchNorm&) = delete;

  // x, y, dy, dx of type t (fp32, or 16-bit as backend.h's "Ops on activations": statistics, gamma, beta
  // and their gradients stay fp32).
  bool forward_train(DType t, int rows, int c, const void* x, const float* gamma, const float* beta, float eps,
                     float momentum, void* y, float* save_mean, float* save_invstd, float* running_mean,
                     float* running_var);
  bool forward_infer(DType t, int rows, int c, const void* x, const float* gamma, const float* beta,
                     const float* running_mean, const float* running_var, float eps, void* y);
  // dx must not be null (the custom kernel serves the variant without an input gradient). cuDNN wants the
  // forward's epsilon: the last forward_train of this shape's is used (none yet: false).
  bool backward(DType t, int rows, int c, const void* x, const void* dy, const float* gamma, const float* save_mean,
                const float* save_invstd, void* dx, float* dgamma, float* dbeta);

 private:
  struct Plan;
  Plan* plan(int rows, int c, DType t, bool training);
  Plan* usable_plan(int rows, int c, DType t, bool training, const char* what);
  bool ok(cudnnStatus_t status, const char* what);

  VendorContext& ctx_;
  cudnnHandle_t handle_;
  ShapeCache<std::unique_ptr<Plan>> plans_;
};

}  // namespace gpu
}  // namespace cnn
