// Static OpenMP work split and chunked reductions shared by the fast CPU kernels (kernels/cpu/fast_cpu.cpp,
// kernels/cpu/batchnorm_fast.cpp, kernels/cpu/batchnorm_blocked.cpp). Compile users with -fopenmp
// (kernels/cpu/fast.mk).
#pragma once
#include <cstddef>
#include <vector>

namespace cnn {

// Below this many elements a parallel region costs more than it saves.
constexpr size_t kMinParallel = 1 << 15;

// for i in [0, count): body(i), statically split over the threads when `work` (elements touched) is large
// enough. One thread runs the loop directly: a one-thread OpenMP region still allocates a team every time.
template <class F>
void parallel_for(int threads, size_t work, long long count, F body) {
  if (threads <= 1 || work < kMinParallel || count <= 1) {
    for (long long i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long long i = 0; i < count; ++i) body(i);
}

// The end of a chunked two-term reduction: slots holds [chunks][2c] per-chunk sums; sum_a[j] and sum_b[j] are
// slot j and c + j added over the chunks in chunk order, so the totals do not depend on the thread count.
inline void add_chunk_slots(const std::vector<double>& slots, long long chunks, size_t c, std::vector<double>& sum_a,
                            std::vector<double>& sum_b) {
  sum_a.assign(c, 0.0);
  sum_b.assign(c, 0.0);
  for (long long q = 0; q < chunks; ++q)
    for (size_t j = 0; j < c; ++j) {
      sum_a[j] += slots[q * 2 * c + j];
      sum_b[j] += slots[q * 2 * c + c + j];
    }
}

}  // namespace cnn
