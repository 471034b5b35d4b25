// Static OpenMP work split shared by the fast CPU kernels (kernels/cpu/fast_cpu.cpp, kernels/cpu/batchnorm_fast.cpp).
// Compile users with -fopenmp (kernels/cpu/fast.mk).
#pragma once
#include <cstddef>

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

}  // namespace cnn
