// Static OpenMP work split and chunked reductions shared by the fast CPU kernels (kernels/cpu/fast_cpu.cpp,
// kernels/cpu/batchnorm_fast.cpp, kernels/cpu/batchnorm_blocked.cpp). Compile users with -fopenmp
// (kernels/cpu/fast.mk).
#pragma once
#include <strings.h>

#include <cstddef>
#include <cstdlib>
#include <vector>

namespace cnn {

// Below this many elements a parallel region costs more than it saves. Starting one wakes the team: its threads
// spin a while after a region by default (~6 us a region on the 2-core test VM), but sleep at once under
// OMP_WAIT_POLICY=passive, as shared machines and `make bench` run (~40-70 us: a futex wake-up per thread).
// There LeNet-5's 14 regions a step cost ~0.6 ms of ~6; its second pooling (0.4 M elements) runs faster on one
// thread, its gradient zeroing and largest SGD update (~50 K) too (docs/perf.md).
inline size_t min_parallel_elements() {
  static const size_t n = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    return policy && strcasecmp(policy, "passive") == 0 ? size_t{1} << 19 : size_t{1} << 15;
  }();
  return n;
}

// for i in [0, count): body(i), statically split over the threads when `work` (elements touched) is large
// enough. One thread runs the loop directly: a one-thread OpenMP region still allocates a team every time.
template <class F>
void parallel_for(int threads, size_t work, long long count, F body) {
  if (threads <= 1 || work < min_parallel_elements() || count <= 1) {
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
