// Eight floats as one AVX2 register (plain loops without AVX2/FMA): the vector unit shared by the fast CPU
// batch-norm kernels (kernels/cpu/batchnorm_fast.cpp, kernels/cpu/batchnorm_blocked.cpp). Internal to them.
#pragma once
#include <cmath>

#include "kernels/dtype.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace cnn {

// Tensors are fp32 or bf16 (the backend's native bf16 path): bf16 values are widened on load and rounded once
// on store exactly as the backend's conversions do (float_to_bf16_bits), so a bf16 call gives the bits that
// widening, the fp32 kernel and narrowing would give, without the conversion passes and with half the bytes.
#if defined(__AVX2__) && defined(__FMA__)
struct V8 {
  __m256 v;
};
inline V8 load8(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store8(float* p, V8 a) { _mm256_storeu_ps(p, a.v); }
inline V8 load8(const Bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))};
}
// float_to_bf16_bits on eight lanes: NaN -> its high half with the quiet bit set, else round to nearest even.
inline void store8(Bf16* p, V8 a) {
  const __m256i x = _mm256_castps_si256(a.v);
  const __m256i hi = _mm256_srli_epi32(x, 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), odd), 16);
  const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
inline V8 zero8() { return {_mm256_setzero_ps()}; }
inline V8 add8(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
inline V8 sub8(V8 a, V8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline V8 fma8(V8 a, V8 b, V8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
// max(a, 0) with NaN -> 0, as the reference's `a > 0 ? a : 0` (maxps returns its second operand on NaN).
inline V8 relu8(V8 a) { return {_mm256_max_ps(a.v, _mm256_setzero_ps())}; }
inline unsigned positive_bits8(V8 a) {
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_GT_OQ)));
}
// Bits of the lanes where a < b; min(a, b) (b where a is NaN: callers pass a non-NaN a).
inline unsigned below_bits8(V8 a, V8 b) {
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)));
}
inline V8 min8(V8 a, V8 b) { return {_mm256_min_ps(a.v, b.v)}; }
inline V8 broadcast8(float a) { return {_mm256_set1_ps(a)}; }
// a where bit k of `bits` is set, 0 elsewhere.
inline V8 select8(unsigned bits, V8 a) {
  const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i on = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lane), lane);
  return {_mm256_and_ps(a.v, _mm256_castsi256_ps(on))};
}
#else
struct V8 {
  float v[8];
};
inline V8 load8(const float* p) {
  V8 r;
  for (int k = 0; k < 8; ++k) r.v[k] = p[k];
  return r;
}
inline void store8(float* p, V8 a) {
  for (int k = 0; k < 8; ++k) p[k] = a.v[k];
}
inline V8 load8(const Bf16* p) {
  V8 r;
  for (int k = 0; k < 8; ++k) r.v[k] = to_float(p[k]);
  return r;
}
inline void store8(Bf16* p, V8 a) {
  for (int k = 0; k < 8; ++k) p[k] = from_float<Bf16>(a.v[k]);
}
inline V8 zero8() { return V8{}; }
#define CNN_V8_OP(name, expr)                          \
  inline V8 name(V8 a, V8 b) {                         \
    V8 r;                                              \
    for (int k = 0; k < 8; ++k) r.v[k] = (expr);       \
    return r;                                          \
  }
CNN_V8_OP(add8, a.v[k] + b.v[k])
CNN_V8_OP(sub8, a.v[k] - b.v[k])
#undef CNN_V8_OP
inline V8 fma8(V8 a, V8 b, V8 c) {
  V8 r;
  for (int k = 0; k < 8; ++k) r.v[k] = std::fma(a.v[k], b.v[k], c.v[k]);
  return r;
}
inline V8 relu8(V8 a) {
  for (float& x : a.v) x = x > 0.f ? x : 0.f;
  return a;
}
inline unsigned positive_bits8(V8 a) {
  unsigned b = 0;
  for (int k = 0; k < 8; ++k) b |= (a.v[k] > 0.f ? 1u : 0u) << k;
  return b;
}
inline unsigned below_bits8(V8 a, V8 b) {
  unsigned r = 0;
  for (int k = 0; k < 8; ++k) r |= (a.v[k] < b.v[k] ? 1u : 0u) << k;
  return r;
}
inline V8 min8(V8 a, V8 b) {
  for (int k = 0; k < 8; ++k) a.v[k] = a.v[k] < b.v[k] ? a.v[k] : b.v[k];
  return a;
}
inline V8 broadcast8(float a) {
  V8 r;
  for (float& x : r.v) x = a;
  return r;
}
inline V8 select8(unsigned bits, V8 a) {
  for (int k = 0; k < 8; ++k)
    if (!(bits >> k & 1u)) a.v[k] = 0.f;
  return a;
}
#endif

}  // namespace cnn
