#include "kernels/cuda/vendor/cudnn_batchnorm.h"

#include "kernels/cuda/vendor/vendor_check.h"
#include "src/base/error.h"

namespace cnn {
namespace gpu {

namespace {
const float kOne = 1.f, kZero = 0.f;
// classify_cudnn_status works on the categories' numbers (it is compiled without cuDNN's headers).
static_assert(CUDNN_STATUS_SUCCESS == 0 && CUDNN_STATUS_BAD_PARAM == 2000 && CUDNN_STATUS_NOT_SUPPORTED == 3000 &&
                  CUDNN_STATUS_CATEGORY(CUDNN_STATUS_NOT_SUPPORTED_SHAPE) == CUDNN_STATUS_NOT_SUPPORTED,
              "cuDNN's status categories changed: update classify_cudnn_status (kernels/cuda/vendor/algo_select.cpp)");
}  // namespace

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

// One plan per (rows, c, type, training): inference allows a smaller N than training, so the two may split
// rows differently (kernels/cuda/vendor/algo_select.h, cudnn_bn_shape). Null when no split fits cuDNN's limits.
CudnnBatchNorm::Plan* CudnnBatchNorm::plan(int rows, int c, DType t, bool training) {
  return plans_.get({rows, c, static_cast<int64_t>(vendor_type(t)), training}, [&]() -> std::unique_ptr<Plan> {
    CudnnBnShape shape;
    if (!cudnn_bn_shape(rows, training, &shape)) return nullptr;
    auto p = std::make_unique<Plan>();
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->stats));
    // 16-bit x and y with fp32 statistics, scale and shift: cuDNN derives the fp32 statistics descriptor.
    const cudnnDataType_t type = t == DType::kF16 ? CUDNN_DATA_HALF : t == DType::kBF16 ? CUDNN_DATA_BFLOAT16
                                                                                       : CUDNN_DATA_FLOAT;
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, type, shape.n, c, shape.h, 1));
    CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->stats, p->x, CUDNN_BATCHNORM_SPATIAL_PERSISTENT));
    return p;
  }).get();
}

// The plan when cuDNN takes the problem, else null (logged once per layer): rows that split into no shape
// within cuDNN's limits, and training on one row per channel (the running variance's unbiased estimate
// divides by rows - 1; the reference keeps the biased 0 there, cuDNN does not).
CudnnBatchNorm::Plan* CudnnBatchNorm::usable_plan(int rows, int c, DType t, bool training, const char* what) {
  if (training && rows < 2) {
    ctx_.fallbacks->note(ctx_.layer, what, "one row per channel (no unbiased variance)");
    return nullptr;
  }
  Plan* p = plan(rows, c, t, training);
  if (!p)
    ctx_.fallbacks->note(ctx_.layer, what,
                         strprintf("%d rows (N*H*W) split into no N <= %lld with H <= %lld", rows,
                                   static_cast<long long>(training ? kCudnnBnMaxTrainN : kCudnnBnMaxInferN),
                                   static_cast<long long>(kCudnnBnMaxH)));
  return p;
}

// By category, cuDNN 9's sub-codes included: "unsupported" means not this problem, fall back; anything else
// is an error.
bool CudnnBatchNorm::ok(cudnnStatus_t status, const char* what) {
  switch (classify_cudnn_status(status)) {
    case CudnnOutcome::kSuccess:
      return true;
    case CudnnOutcome::kUnsupported:
      ctx_.fallbacks->note(ctx_.layer, what,
                           strprintf("%s (status %d)", cudnnGetErrorString(status), static_cast<int>(status)));
      return false;
    case CudnnOutcome::kError:
      break;
  }
  CUDNN_CHECK(status);
  return false;
}

bool CudnnBatchNorm::forward_train(DType t, int rows, int c, const void* x, const float* gamma, const float* beta,
                                   float eps, float momentum, void* y, float* save_mean, float* save_invstd,
                                   float* running_mean, float* running_var) {
  static const char* const what = "cuDNN batch norm forward (training)";
  if (eps < CUDNN_BN_MIN_EPSILON) return false;
  Plan* p = usable_plan(rows, c, t, true, what);
  if (!p) return false;
  p->train_eps = eps;
  return ok(cudnnBatchNormalizationForwardTraining(handle_, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, &kOne, &kZero, p->x,
                                                   x, p->x, y, p->stats, gamma, beta, momentum, running_mean,
                                                   running_var, eps, save_mean, save_invstd),
            what);
}

bool CudnnBatchNorm::forward_infer(DType t, int rows, int c, const void* x, const float* gamma, const float* beta,
                                   const float* running_mean, const float* running_var, float eps, void* y) {
  static const char* const what = "cuDNN batch norm forward (inference)";
  if (eps < CUDNN_BN_MIN_EPSILON) return false;
  Plan* p = usable_plan(rows, c, t, false, what);
  if (!p) return false;
  // Inference has no persistent variant; the statistics descriptor is the same shape for every mode.
  return ok(cudnnBatchNormalizationForwardInference(handle_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, p->x, x, p->x,
                                                    y, p->stats, gamma, beta, running_mean, running_var, eps),
            what);
}

bool CudnnBatchNorm::backward(DType t, int rows, int c, const void* x, const void* dy, const float* gamma,
                              const float* save_mean, const float* save_invstd, void* dx, float* dgamma,
                              float* dbeta) {
  static const char* const what = "cuDNN batch norm backward";
  if (!dx) return false;
  Plan* p = usable_plan(rows, c, t, true, what);
  if (!p || p->train_eps < 0) return false;
  // Data gradient overwritten (beta 0), parameter gradients accumulated (beta 1).
  return ok(cudnnBatchNormalizationBackward(handle_, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, &kOne, &kZero, &kOne, &kOne,
                                            p->x, x, p->x, dy, p->x, dx, p->stats, gamma, dgamma, dbeta,
                                            p->train_eps, save_mean, save_invstd),
            what);
}

}  // namespace gpu
}  // namespace cnn
