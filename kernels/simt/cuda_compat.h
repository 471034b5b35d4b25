// Include this first in every .cu file. Compiled by nvcc (__CUDACC__) it is <cuda_runtime.h> plus the
// three portability macros; compiled by a host compiler (g++ -x c++ file.cu) the same source builds
// against the SIMT emulator. CNN_SIMT_EMULATED tells host code which of the two it got.
//
//   CNN_SHARED(float, tile, [32][33]);        // static shared memory, replaces `__shared__ float tile[32][33];`
//   CNN_DYNAMIC_SHARED(float, smem);          // dynamic shared memory, replaces `extern __shared__ float smem[];`
//   cudaError_t e = CNN_LAUNCH(kern, grid, block, shmem_bytes, stream, args...);   // kern<<<...>>>(args...)
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#define CNN_SIMT_EMULATED 0
#define CNN_SHARED(type, name, dims) __shared__ type name dims
// One untyped extern array for all kernels: nvcc rejects the same extern __shared__ name with two types.
#define CNN_DYNAMIC_SHARED(type, name)                                      \
  extern __shared__ __align__(16) unsigned char cnn_dynamic_shared_raw_[]; \
  type* name = reinterpret_cast<type*>(cnn_dynamic_shared_raw_)
// Evaluates to the launch's configuration error (or cudaSuccess); faults during execution surface at the
// next synchronising call, as usual on a GPU.
#define CNN_LAUNCH(kernel, grid, block, shmem, stream, ...) \
  (kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__), cudaGetLastError())

#else
#define CNN_SIMT_EMULATED 1
#include "kernels/simt/simt.h"
#endif
