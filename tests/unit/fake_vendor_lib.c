/* A stand-in for cuDNN, cuBLASLt or NCCL (kernels/cuda/cuda.mk builds the variants): the version functions that
   kernels/cuda/vendor/vendor_loader.cpp probes, returning the numbers given by FAKE_VERSION and FAKE_CUDART, and one more
   function for the symbol lookups of tests/unit/test_vendor_loader.cpp. */
#include <stddef.h>

#if defined(FAKE_CUDNN)
size_t cudnnGetVersion(void) { return FAKE_VERSION; }
size_t cudnnGetCudartVersion(void) { return FAKE_CUDART; }
int cudnnCreate(void** handle) {
  *handle = NULL;
  return 0;
}
#elif defined(FAKE_CUBLASLT)
size_t cublasLtGetVersion(void) { return FAKE_VERSION; }
size_t cublasLtGetCudartVersion(void) { return FAKE_CUDART; }
#elif defined(FAKE_NCCL)
int ncclGetVersion(int* version) {
  *version = FAKE_VERSION;
  return 0;
}
#endif
