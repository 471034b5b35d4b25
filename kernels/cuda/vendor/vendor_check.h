// Error checks for the NVIDIA libraries (nvcc builds only): like CUDA_CHECK they end the job through
// cnn::fatal, naming the expression, file:line and the library's own status name and message. Includes the
// libraries' API through kernels/cuda/vendor/vendor_lazy.h (resolved when first called).
#pragma once
#include "kernels/cuda/vendor/vendor_lazy.h"

#include "kernels/cuda/cuda_common.h"

namespace cnn {
namespace gpu {

[[noreturn]] void cudnn_failed(const char* expr, cudnnStatus_t status, const char* file, int line);
[[noreturn]] void cublas_failed(const char* expr, cublasStatus_t status, const char* file, int line);

}  // namespace gpu
}  // namespace cnn

#define CUDNN_CHECK(expr)                                                                    \
  do {                                                                                       \
    const cudnnStatus_t cnn_cudnn_status_ = (expr);                                          \
    if (__builtin_expect(cnn_cudnn_status_ != CUDNN_STATUS_SUCCESS, 0))                      \
      ::cnn::gpu::cudnn_failed(#expr, cnn_cudnn_status_, __FILE__, __LINE__);                \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                       \
    const cublasStatus_t cnn_cublas_status_ = (expr);                                        \
    if (__builtin_expect(cnn_cublas_status_ != CUBLAS_STATUS_SUCCESS, 0))                    \
      ::cnn::gpu::cublas_failed(#expr, cnn_cublas_status_, __FILE__, __LINE__);              \
  } while (0)
