// Storage types of the CUDA kernels: float, and __nv_bfloat16/__half for activations stored in 16 bits
// (docs/mixed_precision.md). Kernels templated on the storage type T load through widen() and store through
// narrow<T>(), computing in fp32 in between; the launchers pick T from the op's DType with dispatch() (one
// launcher per op for every type). Included by kernels/cuda/*.cu only.
#pragma once
#include <type_traits>

#include "kernels/cuda/cuda_common.h"
#include "kernels/dtype.h"

namespace cnn {
namespace CNN_CUDA_NS {

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Calls f(static_cast<T*>(nullptr)) with T the CUDA storage type of t (a generic lambda takes the type from
// its argument).
template <class F>
cudaError_t dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kF32: return f(static_cast<float*>(nullptr));
    case DType::kBF16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::kF16: return f(static_cast<__half*>(nullptr));
  }
  return cudaErrorInvalidValue;
}

// dispatch() for code that exists only for the 16-bit types (conversions to and from fp32); fp32 gets
// cudaErrorInvalidValue.
template <class F>
cudaError_t dispatch_16(DType t, F&& f) {
  switch (t) {
    case DType::kBF16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::kF16: return f(static_cast<__half*>(nullptr));
    case DType::kF32: break;
  }
  return cudaErrorInvalidValue;
}

// The DType of a storage type (the inverse of dispatch).
template <class T>
constexpr DType dtype_of() {
  return std::is_same<T, float>::value ? DType::kF32 : std::is_same<T, __half>::value ? DType::kF16 : DType::kBF16;
}

// The element type behind the tag argument of dispatch and dispatch_16.
template <class Tag>
using StorageOf = typename std::remove_pointer<Tag>::type;

}  // namespace CNN_CUDA_NS
}  // namespace cnn
