// The one error path of the vendor libraries (kernels/cuda/vendor/vendor_check.h): status name, the library's message
// (cuDNN 9 keeps a detailed text of the last error), expression and location, then cnn::fatal.
#include "kernels/cuda/vendor/vendor_check.h"
#include "src/base/error.h"

namespace cnn {
namespace gpu {

void cudnn_failed(const char* expr, cudnnStatus_t status, const char* file, int line) {
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  fatal(kExitFailure, strprintf("cuDNN error %s from %s at %s:%d%s%s", cudnnGetErrorString(status), expr, file, line,
                                detail[0] ? ": " : "", detail));
}

void cublas_failed(const char* expr, cublasStatus_t status, const char* file, int line) {
  fatal(kExitFailure, strprintf("cuBLAS error %s (%s) from %s at %s:%d", cublasLtGetStatusName(status),
                                cublasLtGetStatusString(status), expr, file, line));
}

}  // namespace gpu
}  // namespace cnn
