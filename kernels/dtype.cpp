#include "kernels/dtype.h"

#include <cstring>
#ifdef __F16C__
#include <immintrin.h>
#endif

namespace cnn {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& t) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16})
    if (s == dtype_name(d)) {
      t = d;
      return true;
    }
  return false;
}

float round_to(DType t, float x) {
  switch (t) {
    case DType::kF32: return x;
    case DType::kBF16: return to_float(from_float<Bf16>(x));
    case DType::kF16: return to_float(from_float<F16>(x));
  }
  return x;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::kF32: return 1.0 / (1 << 24);
    case DType::kBF16: return 1.0 / (1 << 8);
    case DType::kF16: return 1.0 / (1 << 11);
  }
  return 0;
}

namespace {

template <class From, class To>
void convert_typed(const From* __restrict x, To* __restrict y, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) y[i] = from_float<To>(to_float(x[i]));
}

#ifdef __F16C__
// The F16C instructions round to nearest even with subnormals exactly as half_bits.h does (checked against it in
// tests/unit/test_dtype.cpp), 8 values per instruction: the scalar routine's branches cost ~10x.
template <>
void convert_typed<float, F16>(const float* __restrict x, F16* __restrict y, size_t begin, size_t end) {
  size_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < end; ++i) y[i] = from_float<F16>(x[i]);
}

template <>
void convert_typed<F16, float>(const F16* __restrict x, float* __restrict y, size_t begin, size_t end) {
  size_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < end; ++i) y[i] = to_float(x[i]);
}
#endif

template <class From>
void convert_from(const From* x, DType to, void* y, size_t begin, size_t end) {
  switch (to) {
    case DType::kF32: return convert_typed(x, static_cast<float*>(y), begin, end);
    case DType::kBF16: return convert_typed(x, static_cast<Bf16*>(y), begin, end);
    case DType::kF16: return convert_typed(x, static_cast<F16*>(y), begin, end);
  }
}

}  // namespace

void convert_range(DType from, const void* x, DType to, void* y, size_t begin, size_t end) {
  if (from == to) {
    const size_t e = dtype_size(from);
    std::memcpy(static_cast<char*>(y) + begin * e, static_cast<const char*>(x) + begin * e, (end - begin) * e);
    return;
  }
  switch (from) {
    case DType::kF32: return convert_from(static_cast<const float*>(x), to, y, begin, end);
    case DType::kBF16: return convert_from(static_cast<const Bf16*>(x), to, y, begin, end);
    case DType::kF16: return convert_from(static_cast<const F16*>(x), to, y, begin, end);
  }
}

void convert_host(int threads, size_t n, DType from, const void* x, DType to, void* y) {
  // Below this a parallel region costs more than the conversion.
  constexpr size_t kMinParallel = 1 << 16;
  if (threads <= 1 || n < kMinParallel) return convert_range(from, x, to, y, 0, n);
  const long long parts = threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long p = 0; p < parts; ++p) convert_range(from, x, to, y, n * p / parts, n * (p + 1) / parts);
}

}  // namespace cnn
