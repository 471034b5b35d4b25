#include "kernels/cudnn_batchnorm.h"

#include "kernels/vendor_check.h"

namespace cnn {
namespace gpu {

namespace {
const float kOne = 1.f, kZero = 0.f;
}

struct CudnnBatchNorm::Plan {
  cudnnTensorDescriptor_t x = nullptr, stats = nullptr;
  double train_eps = -1.0;  // of the last forward_train; negative: none yet
  ~Plan() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(stats);
  }
};

CudnnBatchNorm::CudnnBatchNorm(VendorContext& ctx, cudnnHandle_t handle) : ctx_(ctx), handle_(handle) {}
CudnnBatchNorm::~CudnnBatchNorm() = default;

CudnnBatchNorm::Plan& CudnnBatchNorm::plan(int rows, int c, DType t) {
  return *plans_.get({rows, c, static_cast<int64_t>(vendor_type(t))}, [&] {
    auto p = std::make_unique<Plan>();
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->stats));
    // 16-bit x and y with fp32 statistics, scale and shift: cuDNN derives the fp32 statistics descriptor.
    const cudnnDataType_t type = t == DType::kF16 ? CUDNN_DATA_HALF : t == DType::kBF16 ? CUDNN_DATA_BFLOAT16
                                                                                       : CUDNN_DATA_FLOAT;
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, type, rows, c, 1, 1));
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->stats, p->x, CUDNN_BATCHNORM_SPATIAL_PERSISTENT));
    return p;
  });
}

// NOT_SUPPORTED (and BAD_PARAM for shapes outside a mode's limits) means "not this problem": fall back.
// Anything else is an error.
bool CudnnBatchNorm::ok(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (status == CUDNN_STATUS_NOT_SUPPORTED || status == CUDNN_STATUS_BAD_PARAM) {
    ctx_.fallbacks->note(ctx_.layer, what, cudnnGetErrorString(status));
    return false;
  }
  CUDNN_CHECK(status);
  return false;
}

bool CudnnBatchNorm::forward_train(DType t, int rows, int c, const void* x, const float* gamma, const float* beta,
                                   float eps, float momentum, void* y, float* save_mean, float* save_invstd,
                                   float* running_mean, float* running_var) {
  if (eps < CUDNN_BN_MIN_EPSILON) return false;
  Plan& p = plan(rows, c, t);
  p.train_eps = eps;
  return ok(cudnnBatchNormalizationForwardTraining(handle_, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, &kOne, &kZero, p.x, x,
                                                   p.x, y, p.stats, gamma, beta, momentum, running_mean, running_var,
                                                   eps, save_mean, save_invstd),
            "cuDNN batch norm forward (training)");
}

bool CudnnBatchNorm::forward_infer(DType t, int rows, int c, const void* x, const float* gamma, const float* beta,
                                   const float* running_mean, const float* running_var, float eps, void* y) {
  if (eps < CUDNN_BN_MIN_EPSILON) return false;
  Plan& p = plan(rows, c, t);
  // Inference has no persistent variant; the statistics descriptor is the same shape for every mode.
  return ok(cudnnBatchNormalizationForwardInference(handle_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, p.x, x, p.x, y,
                                                    p.stats, gamma, beta, running_mean, running_var, eps),
            "cuDNN batch norm forward (inference)");
}

bool CudnnBatchNorm::backward(DType t, int rows, int c, const void* x, const void* dy, const float* gamma,
                              const float* save_mean, const float* save_invstd, void* dx, float* dgamma,
                              float* dbeta) {
  if (!dx) return false;
  Plan& p = plan(rows, c, t);
  const double eps = p.train_eps;
  if (eps < 0) return false;
  // Data gradient overwritten (beta 0), parameter gradients accumulated (beta 1).
  return ok(cudnnBatchNormalizationBackward(handle_, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, &kOne, &kZero, &kOne, &kOne,
                                            p.x, x, p.x, dy, p.x, dx, p.stats, gamma, dgamma, dbeta, eps, save_mean,
                                            save_invstd),
            "cuDNN batch norm backward");
}

}  // namespace gpu
}  // namespace cnn
