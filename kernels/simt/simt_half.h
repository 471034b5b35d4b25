// __half and __nv_bfloat16 as storage types with the conversions of <cuda_fp16.h>/<cuda_bf16.h>, rounding
// to nearest even as the GPU does, so that data stored in reduced precision rounds the same on both
// builds. Arithmetic happens in float (through the implicit conversions); there are no half intrinsics.
#pragma once
#include <cstdint>

#include "src/base/half_bits.h"

struct __half {
  uint16_t bits_;
  __half() = default;
  __half(float f) : bits_(simt::detail::float_to_half_bits(f)) {}  // NOLINT: implicit, as in cuda_fp16.h
  operator float() const { return simt::detail::half_bits_to_float(bits_); }
};

struct __nv_bfloat16 {
  uint16_t bits_;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : bits_(simt::detail::float_to_bf16_bits(f)) {}  // NOLINT: implicit, as in cuda_bf16.h
  operator float() const { return simt::detail::bf16_bits_to_float(bits_); }
};

namespace simt {
namespace detail {
// A 16-bit value from its bit pattern (the __ushort_as_* intrinsics).
template <class T>
T from_bits(unsigned short u) {
  T v;
  v.bits_ = u;
  return v;
}
}  // namespace detail
}  // namespace simt

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline unsigned short __half_as_ushort(__half h) { return h.bits_; }
inline __half __ushort_as_half(unsigned short u) { return simt::detail::from_bits<__half>(u); }

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits_; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return simt::detail::from_bits<__nv_bfloat16>(u); }
