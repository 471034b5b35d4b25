// __half and __nv_bfloat16 as storage types with the conversions of <cuda_fp16.h>/<cuda_bf16.h>, rounding
// to nearest even as the GPU does, so that data stored in reduced precision rounds the same on both
// builds. Arithmetic happens in float (through the implicit conversions); there are no half intrinsics.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace simt {
namespace detail {

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);  // NaN stays quiet NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // at or past halfway between 65504 and 65536
  if (a < 0x38800000u) {
    // Subnormal (or zero): the value in units of 2^-24, rounded to nearest even by the FPU; 1024 becomes
    // the smallest normal number, which is the right encoding.
    float v;
    std::memcpy(&v, &a, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(v * 16777216.0f));
  }
  uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a & 0x7FFFFFu) >> 13));
  const uint32_t rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
  return sign | static_cast<uint16_t>(h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  const uint32_t bits = sign | (e == 31 ? 0x7F800000u | (m << 13) : ((e - 15 + 127) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace detail
}  // namespace simt

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

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline unsigned short __half_as_ushort(__half h) { return h.bits_; }
inline __half __ushort_as_half(unsigned short u) {
  __half h;
  h.bits_ = u;
  return h;
}

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits_; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  __nv_bfloat16 b;
  b.bits_ = u;
  return b;
}
