// The non-finite check and the observability hooks of the CUDA backend (emulated, and on a GPU where there is
// one) against the CPU reference: count_nonfinite, gated optimizer updates, the host mirror and phase timer.
#include <cmath>

#include "kernels/backend.h"
#include "kernels/nonfinite.h"
#include "tests/cuda/cuda_test_util.h"

namespace cnn::test {
namespace {

using Observe = DeviceTest;

// Random values in [-1, 1] with NaN, +inf and -inf at `bad` positions (and the extremes that are finite).
std::vector<float> with_bad(size_t n, uint64_t seed, const std::vector<size_t>& bad) {
  auto v = random_vec(n, seed);
  const float specials[] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < bad.size(); ++i) v[bad[i]] = specials[i % 3];
  if (n > 3) {
    v[1] = 3.4028235e38f;  // FLT_MAX: finite
    v[2] = -1e-45f;        // a denormal: finite
  }
  return v;
}

TEST_P(Observe, CountNonfiniteMatchesReference) {
  uint64_t seed = 7;
  struct Case {
    size_t n;
    std::vector<size_t> bad;
  };
  // Ragged sizes; bad values first, last, in the middle; none; and one long enough for grid-stride wraps.
  const Case cases[] = {{1, {}}, {1, {0}}, {37, {0, 36}}, {1000, {}}, {1001, {500, 501, 999}},
                        {300007, {5, 123456, 300006, 77777}}};
  for (const Case& c : cases) {
    const auto x = with_bad(c.n, ++seed, c.bad);
    // Accumulates: start from earlier counts, as ranges of one buffer do.
    std::vector<int64_t> want = {3, 17};
    count_nonfinite_cpu(c.n, x.data(), 1000, want.data());
    std::vector<int64_t> fast = {3, 17};
    count_nonfinite_fast(4, c.n, x.data(), 1000, fast.data());
    EXPECT_EQ(fast, want) << "fast CPU, n=" << c.n;
    std::vector<int64_t> cpu = {3, 17};
    cpu_->count_nonfinite(c.n, x.data(), 1000, cpu.data());
    EXPECT_EQ(cpu, want) << "cpu backend, n=" << c.n;
    EXPECT_EQ(want[0], 3 + static_cast<int64_t>(c.bad.size())) << "n=" << c.n;
    size_t last = 0;
    for (size_t b : c.bad) last = std::max(last, b + 1);
    EXPECT_EQ(want[1], c.bad.empty() ? 17 : 1000 + static_cast<int64_t>(last)) << "n=" << c.n;
    DeviceBuffers dev(*dev_);
    int64_t* d_stats = dev.upload(std::vector<int64_t>{3, 17});
    dev_->count_nonfinite(c.n, dev.upload(x), 1000, d_stats);
    EXPECT_EQ(dev.download(d_stats, 2), want) << "device, n=" << c.n;
  }
}

TEST_P(Observe, GatedUpdatesChangeNothingWhileTheFlagIsSet) {
  const size_t n = 1037;
  const auto w0 = random_vec(n, 1), g = random_vec(n, 2), m0 = random_vec(n, 3), v0 = random_vec(n, 4, 0.f, 1.f);
  for (const Backend* which : {cpu_.get(), dev_.get()}) {
    Backend& be = *const_cast<Backend*>(which);
    DeviceBuffers dev(be);
    int64_t* d_flag = dev.upload(std::vector<int64_t>{1});
    float *d_w = dev.upload(w0), *d_g = dev.upload(g), *d_m = dev.upload(m0), *d_v = dev.upload(v0);
    be.set_update_gate(d_flag);
    be.sgd_update(n, d_w, d_g, d_m, 0.1f, 0.9f, 1e-4f, true);
    be.adamw_update(n, d_w, d_g, d_m, d_v, 0.1f, 0.9f, 0.99f, 1e-8f, 1e-2f, 0.1f, 0.01f);
    EXPECT_EQ(dev.download(d_w, n), w0) << be.name();
    EXPECT_EQ(dev.download(d_m, n), m0) << be.name();
    EXPECT_EQ(dev.download(d_v, n), v0) << be.name();
    // Flag cleared on the device: the same gate lets the update through, as without a gate.
    be.upload(d_flag, std::vector<int64_t>{0}.data(), sizeof(int64_t));
    be.sgd_update(n, d_w, d_g, d_m, 0.1f, 0.9f, 1e-4f, false);
    be.set_update_gate(nullptr);
    auto w = w0, m = m0;
    cpu_->sgd_update(n, w.data(), g.data(), m.data(), 0.1f, 0.9f, 1e-4f, false);
    EXPECT_TRUE(all_close(dev.download(d_w, n), w, 1e-6, 1e-5, be.name() + " sgd after the gate opened"));
  }
}

TEST_P(Observe, HostMirrorAndPhaseTimer) {
  DeviceBuffers dev(*dev_);
  int64_t* d_stats = dev.upload(std::vector<int64_t>{0, 0});
  auto mirror = dev_->make_host_mirror(d_stats, 2 * sizeof(int64_t));
  auto timer = dev_->make_phase_timer();
  const auto x = with_bad(5000, 9, {4321});
  timer->mark(1);
  dev_->count_nonfinite(x.size(), dev.upload(x), 0, d_stats);
  timer->mark(0);
  mirror->refresh();
  timer->mark(-1);
  const auto* got = static_cast<const int64_t*>(mirror->wait());
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 4322);
  EXPECT_NE(mirror->poll(), nullptr);  // landed: poll no longer says "in flight"
  double s[2] = {0, 0};
  timer->collect(s, 2, true);
  EXPECT_GT(s[1], 0.0);  // the upload and the count
  EXPECT_GE(s[0], 0.0);
  const MemoryUse mem = dev_->memory_use();
  EXPECT_GE(mem.in_use, x.size() * sizeof(float));
  EXPECT_GE(mem.peak, mem.in_use);
}

INSTANTIATE_TEST_SUITE_P(Targets, Observe, ::testing::ValuesIn(all_targets()), target_name);

}  // namespace
}  // namespace cnn::test
