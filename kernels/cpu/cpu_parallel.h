// Static work split over the fast CPU backend's pool (cpu_pool.h) and chunked reductions shared by its kernels
// (kernels/cpu/fast_cpu.cpp, kernels/cpu/batchnorm_fast.cpp, kernels/cpu/batchnorm_blocked.cpp, ...).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/cpu_pool.h"

namespace cnn {

// Below this many elements a parallel job costs more than it saves. Starting one wakes the workers: libgomp's
// spin a while after a region by default (~6 us a region on the 2-core test VM) and cpu_pool.h's do under
// OMP_WAIT_POLICY=passive too (~1-3 us a job when they are still waiting actively; docs/perf.md, sixteenth pass),
// but with CNNTRAIN_CPU_SPIN_US=0 they sleep at once (~40-70 us: a futex wake-up per thread). There LeNet-5's 14
// regions a step cost ~0.6 ms of ~6; its second pooling (0.4 M elements) runs faster on one thread, its gradient
// zeroing and largest SGD update (~50 K) too (docs/perf.md).
inline size_t min_parallel_elements() {
  static const size_t n = omp_workers_sleep() && pool_spin_us() == 0 ? size_t{1} << 19 : size_t{1} << 15;
  return n;
}

// for i in [0, count): body(i), statically split over the threads (cpu_pool.h) when `work` (elements touched) is
// large enough.
template <class F>
void parallel_for(int threads, size_t work, long long count, F body) {
  if (threads <= 1 || work < min_parallel_elements() || count <= 1) {
    for (long long i = 0; i < count; ++i) body(i);
    return;
  }
  const int nt = static_cast<int>(std::min<long long>(threads, count));
  pool_run(nt, [&](int id, int n) {
    for (long long i = count * id / n; i < count * (id + 1) / n; ++i) body(i);
  });
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
