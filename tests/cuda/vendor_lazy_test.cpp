// The run-time-resolved vendor API (kernels/cuda/vendor/vendor_lazy.h, src/comm/nccl_lazy.h) against the real libraries, without a GPU: calls
// that need no device (status names, versions) go through the macros, resolve from the library the search
// found, and return that library's answers. Skipped, with the search's message, where only the headers exist.
#ifdef CNN_WITH_CUDA
#include <gtest/gtest.h>

#include "kernels/cuda/vendor/vendor_lazy.h"
#include "src/comm/nccl_lazy.h"
#include "src/base/error.h"

namespace cnn::gpu {
namespace {

TEST(VendorLazy, CallsResolveFromTheLibrariesTheSearchFound) {
  for (VendorLib lib : {VendorLib::kCudnn, VendorLib::kCublasLt, VendorLib::kNccl}) {
    const VendorLibStatus s = vendor_loader().status(lib);
    if (!s.loaded) GTEST_SKIP() << s.error;
  }
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR);
  // The version the loader reported at the search is the one the resolved function returns.
  EXPECT_EQ(vendor_loader().status(VendorLib::kNccl).version,
            strprintf("NCCL %d.%d.%d", version / 10000, version / 100 % 100, version % 100));
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidArgument)), "");
}

}  // namespace
}  // namespace cnn::gpu
#endif
