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

// y[i] = x[i] for i in [0, n): between the two 16-bit types through float; fp32 <-> 16 bits through the array
// routines of half_bits.h (vectorised, the same bits as the scalar ones), preferred as exact overloads.
template <class From, class To>
void convert_n(const From* __restrict x, To* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = from_float<To>(to_float(x[i]));
}
static_assert(sizeof(F16) == 2 && sizeof(Bf16) == 2, "16-bit element types are bare words");
template <class T>
uint16_t* words(T* p) { return reinterpret_cast<uint16_t*>(p); }
template <class T>
const uint16_t* words(const T* p) { return reinterpret_cast<const uint16_t*>(p); }
void convert_n(const float* x, F16* y, size_t n) { simt::detail::floats_to_half_bits(x, words(y), n); }
void convert_n(const F16* x, float* y, size_t n) { simt::detail::half_bits_to_floats(words(x), y, n); }
void convert_n(const float* x, Bf16* y, size_t n) { simt::detail::floats_to_bf16_bits(x, words(y), n); }
void convert_n(const Bf16* x, float* y, size_t n) { simt::detail::bf16_bits_to_floats(words(x), y, n); }

template <class From>
void convert_from(const From* x, DType to, void* y, size_t begin, size_t end) {
  switch (to) {
    case DType::kF32: return convert_n(x + begin, static_cast<float*>(y) + begin, end - begin);
    case DType::kBF16: return convert_n(x + begin, static_cast<Bf16*>(y) + begin, end - begin);
    case DType::kF16: return convert_n(x + begin, static_cast<F16*>(y) + begin, end - begin);
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
