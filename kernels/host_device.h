// CNN_HD marks small functions that run on both sides: host code (g++, and the SIMT emulator, where device
// code is host code) and CUDA device code (nvcc).
#pragma once

#if defined(__CUDACC__)
#define CNN_HD __host__ __device__ __forceinline__
#else
#define CNN_HD inline
#endif
