#include "tests/bench/peak.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace cnn::bench {

namespace {

constexpr int kChains = 12;  // > FMA latency (4) x pipes (2): the FMA units never wait on a result
constexpr long kIters = 1 << 20;  // ~10 ms: short runs catch the gaps between other processes' time slices

double secs(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

__attribute__((target("avx2,fma"))) float fma_avx2(long iters) {
  __m256 acc[kChains], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float fma_avx512(long iters) {
  __m512 acc[kChains], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float t[16];
  _mm512_store_ps(t, s);
  return t[0];
}

std::atomic<float> sink{0};

// GFLOP/s of `threads` concurrent runs (sum), best of `tries`.
double run(int threads, bool wide, int tries) {
  const int lanes = wide ? 16 : 8;
  double best = 0;
  for (int t = 0; t < tries; ++t) {
    std::vector<std::thread> pool;
    std::vector<double> gf(threads);
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] {
        auto t0 = std::chrono::steady_clock::now();
        float r = wide ? fma_avx512(kIters) : fma_avx2(kIters);
        gf[i] = 2.0 * lanes * kChains * kIters / secs(t0) / 1e9;
        sink = sink + r;
      });
    for (auto& th : pool) th.join();
    double sum = 0;
    for (double g : gf) sum += g;
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace

Peak measure_peak(int threads) {
  Peak p;
  const bool has512 = __builtin_cpu_supports("avx512f");
  double a2 = run(1, false, 25), a5 = has512 ? run(1, true, 25) : 0;
  p.per_core = std::max(a2, a5);
  p.isa = a5 > a2 ? "AVX-512" : "AVX2";
  p.all_threads = run(threads, a5 > a2, 25);
  return p;
}

}  // namespace cnn::bench
