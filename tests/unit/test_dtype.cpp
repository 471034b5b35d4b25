// The bf16/fp16 conversions of kernels/dtype.h against independent oracles: the CPU's F16C instructions for
// fp16 (IEEE round to nearest even, subnormals included) and a nearest-of-two-neighbours search in double
// for bf16; every 16-bit pattern survives a round trip; bulk conversion is the same on any thread count and
// gives the scalar routines' bits.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/rng.h"

namespace cnn {
namespace {

uint32_t bits32(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float from_bits32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// bf16 by definition: of the two bf16 neighbours of a finite x, the nearer; on a tie the one with an even
// last bit; beyond the largest bf16 by half an ulp or more, inf.
uint16_t bf16_oracle(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  const uint16_t lo = static_cast<uint16_t>(b >> 16);  // truncation: the neighbour towards zero
  if ((b & 0xFFFFu) == 0) return lo;
  const uint16_t hi = lo + 1;  // away from zero (0x7F7F + 1 is inf: the "next" value is 2^128 there)
  const double vlo = from_bits32(static_cast<uint32_t>(lo) << 16);
  const double vhi = (lo & 0x7FFFu) == 0x7F7Fu ? std::copysign(std::ldexp(1.0, 128), x)
                                                 : from_bits32(static_cast<uint32_t>(hi) << 16);
  const double dlo = std::fabs(x - vlo), dhi = std::fabs(x - vhi);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

// Random bit patterns weighted towards the interesting exponents: fp16's range and subnormals, bf16's top.
std::vector<float> sample_floats(size_t n, uint64_t seed) {
  CounterRng rng(seed, 3);
  std::vector<float> v;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = static_cast<uint32_t>(rng.next());
    if (i % 4 == 1) b = (b & 0x807FFFFFu) | ((100u + static_cast<uint32_t>(rng.below(50))) << 23);  // 2^-27..2^22
    if (i % 4 == 2) b = (b & 0x807FFFFFu) | ((250u + static_cast<uint32_t>(rng.below(5))) << 23);   // near bf16 max
    if (i % 4 == 3) b = (b & 0xFFFF0000u) | (0x7FFFu + static_cast<uint32_t>(rng.below(3)));  // a bf16 tie or beside
    v.push_back(from_bits32(b));
  }
  for (float s : {0.f, -0.f, INFINITY, -INFINITY, 65504.f, 65519.996f, 65520.f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  3.3895314e38f, 3.4028235e38f})
    v.push_back(s);
  return v;
}

TEST(Dtype, Fp16MatchesTheF16cInstructions) {
  for (float x : sample_floats(2000000, 1)) {
    if (std::isnan(x)) continue;
    const uint16_t want = _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
    const F16 got = from_float<F16>(x);
    ASSERT_EQ(got.bits, want) << "x = " << x;
    ASSERT_EQ(to_float(got), _cvtsh_ss(want));
  }
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  for (float x : sample_floats(2000000, 2)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(from_float<Bf16>(x).bits, bf16_oracle(x)) << "x = " << x;
  }
  EXPECT_EQ(from_float<Bf16>(1.00390625f).bits, 0x3F80);  // 1 + 2^-8: a tie, rounds to the even 1.0
  EXPECT_EQ(from_float<Bf16>(1.01171875f).bits, 0x3F82);  // 1 + 3*2^-8: a tie, rounds up to even
}

TEST(Dtype, NanStaysNanAndEveryPatternRoundTrips) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    EXPECT_TRUE(std::isnan(round_to(t, std::nanf(""))));
    EXPECT_TRUE(std::isnan(round_to(t, -std::nanf(""))));
    EXPECT_EQ(round_to(t, INFINITY), INFINITY);
    EXPECT_TRUE(std::signbit(round_to(t, -0.f)));
    for (uint32_t b = 0; b < 65536; ++b) {
      const uint16_t bits = static_cast<uint16_t>(b);
      const float v = t == DType::kBF16 ? to_float(Bf16{bits}) : to_float(F16{bits});
      if (std::isnan(v)) continue;
      const uint16_t back = t == DType::kBF16 ? from_float<Bf16>(v).bits : from_float<F16>(v).bits;
      ASSERT_EQ(back, bits) << dtype_name(t) << " pattern " << b;
    }
  }
}

TEST(Dtype, RoundingErrorIsWithinTheUnitRoundoff) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (float x : sample_floats(200000, 3)) {
      const float r = round_to(t, x);
      // Normal results only: overflow to inf and subnormals have larger relative errors.
      if (!std::isfinite(r) || !std::isfinite(x) || std::fabs(r) < (t == DType::kF16 ? 6.2e-5f : 1.2e-38f)) continue;
      ASSERT_LE(std::fabs(static_cast<double>(r) - x), unit_roundoff(t) * std::fabs(x)) << dtype_name(t) << " " << x;
    }
}

TEST(Dtype, BulkConversionMatchesTheScalarOneOnAnyThreadCount) {
  const std::vector<float> x = sample_floats(300001, 4);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> one(x.size()), two(x.size()), three(x.size());
    convert_host(1, x.size(), DType::kF32, x.data(), t, one.data());
    convert_host(2, x.size(), DType::kF32, x.data(), t, two.data());
    convert_host(3, x.size(), DType::kF32, x.data(), t, three.data());
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, three);
    // The bulk path (vector instructions where the build has them) gives the scalar routine's bits, NaNs too.
    size_t nans = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      nans += std::isnan(x[i]);
      ASSERT_EQ(one[i], t == DType::kBF16 ? from_float<Bf16>(x[i]).bits : from_float<F16>(x[i]).bits)
          << "x = " << x[i] << " (bits " << std::hex << bits32(x[i]) << ")";
    }
    EXPECT_GT(nans, 100u);  // the sample holds NaNs with many payloads (random exponent 255)
    std::vector<float> back(x.size());
    convert_host(2, x.size(), t, one.data(), DType::kF32, back.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) continue;
      ASSERT_EQ(back[i], round_to(t, x[i]));
    }
  }
}

TEST(Dtype, BulkWideningMatchesTheScalarOneOnEveryPattern) {
  // All 65536 words, shuffled (an odd multiplier permutes them) so that NaNs, signalling ones included
  // (F16C would quiet those), sit in vectors beside ordinary values.
  std::vector<uint16_t> words;
  for (uint32_t b = 0; b < 65536; ++b) words.push_back(static_cast<uint16_t>(b * 40503u));
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<float> got(words.size());
    convert_host(1, words.size(), t, words.data(), DType::kF32, got.data());
    for (size_t i = 0; i < words.size(); ++i) {
      const float want = t == DType::kBF16 ? to_float(Bf16{words[i]}) : to_float(F16{words[i]});
      ASSERT_EQ(bits32(got[i]), bits32(want)) << dtype_name(t) << " word " << std::hex << words[i];
    }
  }
}

TEST(Dtype, NamesParse) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    DType back = DType::kF32;
    ASSERT_TRUE(parse_dtype(dtype_name(t), back));
    EXPECT_EQ(back, t);
  }
  DType t;
  EXPECT_FALSE(parse_dtype("fp8", t));
  EXPECT_FALSE(parse_dtype("", t));
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
}

}  // namespace
}  // namespace cnn
