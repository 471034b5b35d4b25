// Storage types of tensors. Arithmetic is fp32 everywhere; bf16 and fp16 are storage formats for activations,
// activation gradients and the 16-bit weight copy (docs/mixed_precision.md). Conversions round to nearest
// even with the bit-level routines the SIMT emulator's __half/__nv_bfloat16 use, so host code and emulated
// kernels round identically.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/half_bits.h"

namespace cnn {

enum class DType : uint8_t { kF32, kBF16, kF16 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
const char* dtype_name(DType t);  // "fp32", "bf16", "fp16": the spelling of --precision
// Parses a dtype_name(); false for anything else.
bool parse_dtype(const std::string& s, DType& t);

// Element types for host code templated over the storage type (arithmetic goes through float).
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
inline float to_float(float x) { return x; }
inline float to_float(Bf16 x) { return simt::detail::bf16_bits_to_float(x.bits); }
inline float to_float(F16 x) { return simt::detail::half_bits_to_float(x.bits); }
template <class T>
T from_float(float x);
template <>
inline float from_float<float>(float x) { return x; }
template <>
inline Bf16 from_float<Bf16>(float x) { return {simt::detail::float_to_bf16_bits(x)}; }
template <>
inline F16 from_float<F16>(float x) { return {simt::detail::float_to_half_bits(x)}; }

// x rounded to the nearest value of t (x itself for kF32).
float round_to(DType t, float x);
// Unit roundoff of t (2^-24, 2^-8, 2^-11): |round_to(t, x) - x| <= unit_roundoff(t) * |x| unless the result
// overflows or is subnormal.
double unit_roundoff(DType t);

// y[i] = x[i] converted from `from` to `to`, for i in [begin, end) (any pair of types; equal types copy).
// Single-threaded; callers split large arrays.
void convert_range(DType from, const void* x, DType to, void* y, size_t begin, size_t end);
// The whole array on `threads` threads (OpenMP, static split: the result does not depend on the count).
void convert_host(int threads, size_t n, DType from, const void* x, DType to, void* y);

}  // namespace cnn
