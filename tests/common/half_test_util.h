// Helpers for tests of the 16-bit (bf16/fp16) ops: random data rounded to a 16-bit type, its bits, and the
// tolerance rule of docs/mixed_precision.md (|a - ref| <= atol + eps*|ref|, eps = the unit roundoff of the
// type, ref = the fp32 reference op on the same 16-bit inputs before its output is rounded).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "tests/common/test_util.h"

namespace cnn::test {

inline const DType kHalfTypes[] = {DType::kBF16, DType::kF16};

// x rounded to t, as 16-bit patterns.
inline std::vector<uint16_t> to_bits(const std::vector<float>& x, DType t) {
  std::vector<uint16_t> b(x.size());
  convert_range(DType::kF32, x.data(), t, b.data(), 0, x.size());
  return b;
}

// 16-bit patterns of type t, widened to fp32 (exact).
inline std::vector<float> from_bits(const std::vector<uint16_t>& b, DType t) {
  std::vector<float> x(b.size());
  convert_range(t, b.data(), DType::kF32, x.data(), 0, b.size());
  return x;
}

// Uniform values in [lo, hi) rounded to t (so that they are exactly representable in t).
inline std::vector<float> random_rounded(size_t n, uint64_t seed, DType t, float lo = -1.f, float hi = 1.f) {
  return from_bits(to_bits(random_vec(n, seed, lo, hi), t), t);
}

// The 16-bit tolerance rule: one rounding of the result (eps*|ref|) plus atol for the accumulation order.
template <class A, class B>
::testing::AssertionResult close16(const A& got, const B& ref, DType t, double atol, const std::string& what) {
  return all_close(got, ref, atol, unit_roundoff(t), what + " (" + dtype_name(t) + ")");
}

// Bit-for-bit equality of two 16-bit results (ops that compute the reference's fp32 expression exactly).
inline ::testing::AssertionResult same_bits(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                                            DType t, const std::string& what) {
  return all_close(from_bits(got, t), from_bits(want, t), 0, 0, what + " (" + dtype_name(t) + ", exact)");
}

}  // namespace cnn::test
