// Storage types of the CUDA kernels: float, and __nv_bfloat16/__half for activations stored in 16 bits
// (docs/mixed_precision.md). Kernels templated on the storage type T load through widen() and store through
// narrow<T>(), computing in fp32 in between; the launchers of the 16-bit ops pick T from a DType with
// dispatch_16(). Included by kernels/cuda/*.cu only.
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

// Calls f(static_cast<T*>(nullptr)) with T the CUDA type of the 16-bit DType t (a generic lambda takes the
// type from its argument); fp32 is not a 16-bit type and gets cudaErrorInvalidValue.
template <class F>
cudaError_t dispatch_16(DType t, F&& f) {
  switch (t) {
    case DType::kBF16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::kF16: return f(static_cast<__half*>(nullptr));
    case DType::kF32: break;
  }
  return cudaErrorInvalidValue;
}

// The DType of a storage type (the inverse of dispatch_16).
template <class T>
constexpr DType dtype_of() {
  return std::is_same<T, float>::value ? DType::kF32 : std::is_same<T, __half>::value ? DType::kF16 : DType::kBF16;
}

// The element type behind dispatch_16's tag argument.
template <class Tag>
using StorageOf = typename std::remove_pointer<Tag>::type;

}  // namespace CNN_CUDA_NS
}  // namespace cnn
