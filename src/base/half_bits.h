// Bit-exact float <-> IEEE binary16 and bfloat16 conversions, rounding to nearest even as the GPU does (NaN
// stays a quiet NaN, overflow becomes inf, fp16 subnormals are kept). Used by the emulator's __half and
// __nv_bfloat16 and by cnntrain's CPU code (kernels/dtype.h), so that data stored in 16 bits rounds
// identically on the CPU reference, the emulated kernels and the GPU. Self-contained: no emulator headers.
// The array forms at the end give the same bits as the scalar routines for every input, NaNs included.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#ifdef __F16C__
#include <immintrin.h>
#endif

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

// y[i] = the scalar routine of x[i] for i in [0, n). With F16C (x86-64-v3 builds) fp16 goes 8 values per
// instruction, ~10x the scalar routine's branches; the instructions keep a NaN's payload where the scalar
// routines write the canonical quiet NaN (and quiet a signalling one where they do not), so the rare lanes
// holding a NaN are redone by the scalar routine.
inline void floats_to_half_bits(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    if (const int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
      for (int j = 0; j < 8; ++j)
        if (nan >> j & 1) y[i + j] = float_to_half_bits(x[i + j]);
  }
#endif
  for (; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

inline void half_bits_to_floats(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, v);
    if (const int nan = _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
      for (int j = 0; j < 8; ++j)
        if (nan >> j & 1) y[i + j] = half_bits_to_float(x[i + j]);
  }
#endif
  for (; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

// bf16 needs no special instructions: the compiler vectorises these loops (integer adds, shifts, a select).
inline void floats_to_bf16_bits(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = float_to_bf16_bits(x[i]);
}

inline void bf16_bits_to_floats(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = bf16_bits_to_float(x[i]);
}

}  // namespace detail
}  // namespace simt
