// Sweep cases: the non-finite count, gated optimizer updates, and the observability hooks (host mirror, phase
// timer, memory use). The hooks have no numeric result of their own, so their cases record properties (as
// 0/1) that must hold on every backend as they do on the reference.
#include <cmath>

#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

// Random values in [-1, 1] with NaN, +inf and -inf at `bad` (and FLT_MAX and a denormal, which are finite).
std::vector<float> with_bad(size_t n, uint64_t seed, const std::vector<size_t>& bad) {
  auto v = random_vec(n, seed);
  if (n > 3) {
    v[1] = 3.4028235e38f;
    v[2] = -1e-45f;
  }
  const float specials[] = {NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < bad.size(); ++i) v[bad[i]] = specials[i % 3];
  return v;
}

double flag(bool b) { return b ? 1 : 0; }

}  // namespace

CNN_SWEEP_CASES(observe) {
  struct Shape {
    size_t n;
    std::vector<size_t> bad;
  };
  // Bad values first, last, adjacent, none; the long one wraps grid-stride loops and uses the threaded scan.
  const Shape shapes[] = {{1, {}}, {1, {0}}, {37, {0, 36}}, {1000, {}}, {1001, {1, 500, 501, 999}},
                          {300007, {5, 123456, 300006, 77777}}};
  for (const Shape& s : shapes) {
    add_case({"count_nonfinite", "n=" + std::to_string(s.n) + " bad=" + std::to_string(s.bad.size()), {},
              [s](Run& r) {
      // Accumulates onto earlier results, as the ranges of one gradient buffer do.
      int64_t* d_stats = r.upload(std::vector<int64_t>{3, 17});
      r.be.count_nonfinite(s.n, r.upload(with_bad(s.n, 11 + s.n, s.bad)), 1000, d_stats);
      const auto got = r.download(d_stats, 2);
      r.output_host("count, 1 + last offset", {static_cast<double>(got[0]), static_cast<double>(got[1])}, kExact);
    }});
  }

  add_case({"set_update_gate", "n=1037", {"sgd_update", "adamw_update"}, [](Run& r) {
    const size_t n = 1037;
    int64_t* d_flag = r.upload(std::vector<int64_t>{2});
    float *d_w = r.upload(random_vec(n, 1)), *d_g = r.upload(random_vec(n, 2));
    float *d_m = r.upload(random_vec(n, 3)), *d_v = r.upload(random_vec(n, 4, 0.f, 1.f));
    r.be.set_update_gate(d_flag);
    r.be.sgd_update(n, d_w, d_g, d_m, 0.1f, 0.9f, 1e-4f, true);
    r.be.adamw_update(n, d_w, d_g, d_m, d_v, 0.1f, 0.9f, 0.99f, 1e-8f, 1e-2f, 0.1f, 0.01f);
    r.output("w while gated", d_w, n, kExact);
    r.output("momentum while gated", d_m, n, kExact);
    r.output("v while gated", d_v, n, kExact);
    // The flag cleared on the device: the same gate lets the next update through.
    const int64_t zero = 0;
    r.be.upload(d_flag, &zero, sizeof zero);
    r.be.sgd_update(n, d_w, d_g, d_m, 0.1f, 0.9f, 1e-4f, false);
    r.be.set_update_gate(nullptr);
    r.output("w after the gate opened", d_w, n, kDefault);
  }});

  add_case({"make_host_mirror", "after a count", {"count_nonfinite"}, [](Run& r) {
    int64_t* d_stats = r.upload(std::vector<int64_t>{0, 0});
    auto mirror = r.be.make_host_mirror(d_stats, 2 * sizeof(int64_t));
    r.be.count_nonfinite(5000, r.upload(with_bad(5000, 9, {4321})), 0, d_stats);
    mirror->refresh();
    const auto* got = static_cast<const int64_t*>(mirror->wait());
    r.output_host("mirrored count, 1 + last offset", {static_cast<double>(got[0]), static_cast<double>(got[1])},
                  kExact);
    r.output_host("poll after wait is ready", {flag(mirror->poll() == got)}, kExact);
  }});

  add_case({"make_phase_timer", "three phases", {}, [](Run& r) {
    auto timer = r.be.make_phase_timer();
    const size_t n = 1 << 20;
    float* d_x = r.garbage(n);
    timer->mark(1);
    r.be.fill(d_x, n, 1.f);
    r.be.count_nonfinite(n, d_x, 0, r.upload(std::vector<int64_t>{0, 0}));
    timer->mark(-1);  // the gap until the next mark belongs to no phase
    r.be.fill(d_x, n, 2.f);
    timer->mark(0);
    r.be.fill(d_x, n, 4.f);
    timer->mark(2);  // still running at collect: not charged yet
    r.be.fill(d_x, n, 5.f);
    double s[3] = {1000, 1000, 1000};  // collect adds onto these
    timer->collect(s, 3, true);
    r.output_host("phases 1 and 0 added their work, open phase 2 nothing",
                  {flag(s[1] > 1000), flag(s[0] > 1000), flag(s[2] == 1000)}, kExact);
  }});

  add_case({"memory_use", "alloc and release 4 MiB", {}, [](Run& r) {
    const MemoryUse a = r.be.memory_use();
    void* p = r.be.alloc(4u << 20);
    const MemoryUse b = r.be.memory_use();
    r.be.release(p);
    const MemoryUse c = r.be.memory_use();
    r.output_host("in use grows by the block, returns, peak keeps it",
                  {flag(b.in_use >= a.in_use + (4u << 20)), flag(c.in_use == a.in_use), flag(b.peak >= b.in_use),
                   flag(c.peak == b.peak)},
                  kExact);
  }});
}

}  // namespace cnn::sweep
