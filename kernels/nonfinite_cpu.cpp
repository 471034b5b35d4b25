#include "kernels/nonfinite.h"

#include <algorithm>

namespace cnn {

namespace {

// The scan of one chunk: count and the largest bad index + 1 (0: none). Bad values are rare, so each block is
// first tested with a branch-free (vectorised) OR and only a block holding one is walked element by element.
void scan(size_t begin, size_t end, const float* x, int64_t& count, int64_t& last) {
  constexpr size_t kBlock = 2048;
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t e = b + kBlock < end ? b + kBlock : end;
    uint32_t any = 0;
    for (size_t i = b; i < e; ++i) any |= is_nonfinite_bits(x[i]);
    if (!any) continue;
    for (size_t i = b; i < e; ++i)
      if (is_nonfinite_bits(x[i])) {
        ++count;
        last = static_cast<int64_t>(i) + 1;
      }
  }
}

void merge(int64_t base, int64_t count, int64_t last, int64_t* stats) {
  stats[0] += count;
  if (last > 0) stats[1] = std::max(stats[1], base + last);
}

}  // namespace

void count_nonfinite_cpu(size_t n, const float* x, int64_t base, int64_t* stats) {
  int64_t count = 0, last = 0;
  scan(0, n, x, count, last);
  merge(base, count, last, stats);
}

void count_nonfinite_fast(int threads, size_t n, const float* x, int64_t base, int64_t* stats) {
  // Below this a thread team costs more than the scan.
  constexpr size_t kSerial = 1 << 16;
  int64_t count = 0, last = 0;
  if (threads <= 1 || n < kSerial) {
    scan(0, n, x, count, last);
  } else {
#pragma omp parallel for num_threads(threads) reduction(+ : count) reduction(max : last) schedule(static)
    for (int t = 0; t < threads; ++t) {
      const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
      int64_t c = 0, l = 0;
      scan(lo, hi, x, c, l);
      count += c;
      last = std::max(last, l);
    }
  }
  merge(base, count, last, stats);
}

}  // namespace cnn
