// Non-finite checks over float buffers (gradients, losses):
//   count_nonfinite: stats[0] += number of NaN/+-inf in x[0, n); stats[1] = max(stats[1], base + i + 1) for
//   the largest such index i (unchanged when there is none). A value is non-finite when its exponent bits are
//   all ones, tested on the bits so that no compiler flag can assume finite math away.
// The fast variant splits x over `threads` (OpenMP); the result is the same for any thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cnn {

inline bool is_nonfinite_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x7f800000u) == 0x7f800000u;
}

void count_nonfinite_cpu(size_t n, const float* x, int64_t base, int64_t* stats);
void count_nonfinite_fast(int threads, size_t n, const float* x, int64_t base, int64_t* stats);

}  // namespace cnn
