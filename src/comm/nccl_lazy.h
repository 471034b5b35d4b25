// NCCL's API for the nvcc build, resolved at run time like cuDNN's and cuBLASLt's
// (kernels/cuda/vendor/vendor_lazy.h): every NCCL function the plugin calls is a function-like macro that
// fetches it from libnccl (dlopened on the first call, kernels/cuda/vendor/vendor_loader.h) and calls it, with
// the signature of <nccl.h>, which is included first so that no later include sees the macros. The only
// includer of <nccl.h>: src/comm/nccl_compat.h for the nvcc build, and the test of the resolved calls.
#pragma once
#include <nccl.h>

#include <type_traits>

#include "kernels/cuda/vendor/vendor_lazy.h"

// The loader expects the NCCL major version it was built for (kNcclMajor) and calls ncclGetVersion through
// this type (it is compiled without the vendor headers).
static_assert(NCCL_MAJOR == ::cnn::gpu::kNcclMajor, "<nccl.h> is not of the NCCL major version the loader expects");
static_assert(std::is_same<decltype(&::ncclGetVersion), ncclResult_t (*)(int*)>::value &&
                  sizeof(ncclResult_t) == sizeof(int), "ncclGetVersion is called as int (*)(int*)");

#define CNN_NCCL(name) CNN_VENDOR_FN(kNccl, name)
#define ncclAllReduce(...) CNN_NCCL(ncclAllReduce)(__VA_ARGS__)
#define ncclCommAbort(...) CNN_NCCL(ncclCommAbort)(__VA_ARGS__)
#define ncclCommDestroy(...) CNN_NCCL(ncclCommDestroy)(__VA_ARGS__)
#define ncclCommFinalize(...) CNN_NCCL(ncclCommFinalize)(__VA_ARGS__)
#define ncclCommGetAsyncError(...) CNN_NCCL(ncclCommGetAsyncError)(__VA_ARGS__)
#define ncclCommInitRankConfig(...) CNN_NCCL(ncclCommInitRankConfig)(__VA_ARGS__)
#define ncclGetErrorString(...) CNN_NCCL(ncclGetErrorString)(__VA_ARGS__)
#define ncclGetLastError(...) CNN_NCCL(ncclGetLastError)(__VA_ARGS__)
#define ncclGetUniqueId(...) CNN_NCCL(ncclGetUniqueId)(__VA_ARGS__)
#define ncclGetVersion(...) CNN_NCCL(ncclGetVersion)(__VA_ARGS__)
