#include "kernels/dtype.h"

#include <cstring>

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

// fp32 <-> 16 bits through the array routines of half_bits.h (vectorised, the same bits as the scalar ones).
static_assert(sizeof(F16) == 2 && sizeof(Bf16) == 2, "16-bit element types are bare words");
const uint16_t* words(const F16* p) { return reinterpret_cast<const uint16_t*>(p); }
const uint16_t* words(const Bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* words(F16* p) { return reinterpret_cast<uint16_t*>(p); }
uint16_t* words(Bf16* p) { return reinterpret_cast<uint16_t*>(p); }

template <>
void convert_typed<float, F16>(const float* __restrict x, F16* __restrict y, size_t begin, size_t end) {
  simt::detail::floats_to_half_bits(x + begin, words(y + begin), end - begin);
}
template <>
void convert_typed<F16, float>(const F16* __restrict x, float* __restrict y, size_t begin, size_t end) {
  simt::detail::half_bits_to_floats(words(x + begin), y + begin, end - begin);
}
template <>
void convert_typed<float, Bf16>(const float* __restrict x, Bf16* __restrict y, size_t begin, size_t end) {
  simt::detail::floats_to_bf16_bits(x + begin, words(y + begin), end - begin);
}
template <>
void convert_typed<Bf16, float>(const Bf16* __restrict x, float* __restrict y, size_t begin, size_t end) {
  simt::detail::bf16_bits_to_floats(words(x + begin), y + begin, end - begin);
}

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
