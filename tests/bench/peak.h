// Measured FP32 peak of this machine: independent FMA chains in registers (no memory traffic), per core and
// with several threads at once. The fraction-of-peak figures of the benchmark divide by these.
#pragma once

namespace cnn::bench {

struct Peak {
  double per_core = 0;       // GFLOP/s, one thread alone (best of several short runs)
  double all_threads = 0;    // GFLOP/s, `threads` threads at once (sum)
  const char* isa = "";      // the wider of AVX2/AVX-512 when it was faster
};

Peak measure_peak(int threads);

}  // namespace cnn::bench
