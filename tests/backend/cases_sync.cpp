// Sweep cases: the data-parallel ops (kernels/batchnorm_sync.h, Backend::softmax_xent_totals). Synchronised
// batch norm's split passes get statistics summed over two "ranks", as an allreduce would leave them; the
// loss totals accumulate on the device across calls. The fast CPU backend runs these ops' reference kernels,
// so the expected outputs come from the independent oracles of tests/backend/oracles.h.
#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

// This rank's statistics plus another rank's (rows + 2 rows of other data): what the allreduce returns.
std::vector<double> global_stats(int rows, int c, uint64_t s) {
  std::vector<double> mine = oracle::batchnorm_stats(rows, c, bn_input(rows, c, s));
  const std::vector<double> other = oracle::batchnorm_stats(rows + 2, c, bn_input(rows + 2, c, s + 50));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] += other[i];
  return mine;
}

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void output_doubles(Run& r, const std::string& name, const double* d, size_t n, Tol t) {
  const auto v = r.download(d, n);
  r.output_host(name, std::vector<double>(v.begin(), v.end()), t);
}

// One shape's inputs, shared by the forward and the backward cases.
struct SyncShape {
  int rows, c;
  std::string shape;
  size_t nx, ns;
  uint64_t s;
  std::vector<float> x, gamma, beta, rm, rv;
  std::vector<double> stats;
};

SyncShape sync_shape(int rows, int c) {
  SyncShape h;
  h.rows = rows;
  h.c = c;
  h.shape = "rows " + std::to_string(rows) + " c " + std::to_string(c);
  h.nx = static_cast<size_t>(rows) * c;
  h.ns = 2 * static_cast<size_t>(c) + 1;
  h.s = 3000 + static_cast<uint64_t>(rows) * 100 + c;
  h.x = bn_input(rows, c, h.s);
  h.stats = global_stats(rows, c, h.s);
  h.gamma = random_vec(c, h.s + 3);
  h.beta = random_vec(c, h.s + 4);
  h.rm = random_vec(c, h.s + 1);
  h.rv = random_vec(c, h.s + 2, 0.5f, 2.f);
  return h;
}

constexpr float kEps = 1e-5f, kMomentum = 0.1f;

void add_sync_forward_cases(const SyncShape& h) {
  const int rows = h.rows, c = h.c;
  const size_t nx = h.nx, ns = h.ns;
  const float eps = kEps, momentum = kMomentum;
  const std::string& shape = h.shape;
  const auto &x = h.x, &gamma = h.gamma, &beta = h.beta, &rm = h.rm, &rv = h.rv;
  const auto& stats = h.stats;
  add_case({"batchnorm_stats", shape, {}, [=](Run& r) {
    double* d_stats = r.upload(std::vector<double>(ns, -1.0));
    r.be.batchnorm_stats(rows, c, r.upload(x), d_stats);
    // Double sums of up to 700 floats of size 1-250: only the summation order differs.
    output_doubles(r, "stats", d_stats, ns, Tol{1e-9, 1e-12});
  }, [=](Run& r) { r.output_host("stats", oracle::batchnorm_stats(rows, c, x), Tol{1e-9, 1e-12}); }});
  // y = x*scale + shift in float with x up to ~225 and scale up to ~2: products and shift of ~450, whose
  // ulp (3e-5) bounds y's rounding against the exact value.
  const Tol ty{1e-4, 1e-4};
  add_case({"batchnorm_forward_from_stats", shape, {}, [=](Run& r) {
    float* d_y = r.garbage(nx);
    float *d_mean = r.garbage(c), *d_invstd = r.garbage(c);
    float* d_rm = r.upload(rm);
    float* d_rv = r.upload(rv);
    r.be.batchnorm_forward_from_stats(rows, c, r.upload(x), r.upload(stats), r.upload(gamma), r.upload(beta), eps,
                                      momentum, d_y, d_mean, d_invstd, d_rm, d_rv);
    r.output("y", d_y, nx, ty);
    r.output("save_mean", d_mean, c, kDefault);
    r.output("save_invstd", d_invstd, c, kDefault);
    r.output("running_mean", d_rm, c, kDefault);
    r.output("running_var", d_rv, c, kDefault);
  }, [=](Run& r) {
    const auto o = oracle::batchnorm_forward_from_stats(rows, c, x, stats, gamma, beta, eps, momentum, rm, rv);
    r.output_host("y", o.y, ty);
    r.output_host("save_mean", o.mean, kDefault);
    r.output_host("save_invstd", o.invstd, kDefault);
    r.output_host("running_mean", o.running_mean, kDefault);
    r.output_host("running_var", o.running_var, kDefault);
  }});
}

void add_sync_backward_cases(const SyncShape& h) {
  const int rows = h.rows, c = h.c;
  const size_t nx = h.nx, ns = h.ns;
  const uint64_t s = h.s;
  const float eps = kEps, momentum = kMomentum;
  const std::string& shape = h.shape;
  const auto &x = h.x, &gamma = h.gamma, &beta = h.beta, &rm = h.rm, &rv = h.rv;
  const auto& stats = h.stats;
  // The saved statistics of a forward pass over both ranks' data (rounded to float, as a backend saves
  // them), the local sums and the sums the allreduce would return: this rank's plus made-up ones of
  // another rank.
  const auto fwd = oracle::batchnorm_forward_from_stats(rows, c, x, stats, gamma, beta, eps, momentum, rm, rv);
  const std::vector<float> mean(fwd.mean.begin(), fwd.mean.end()), invstd(fwd.invstd.begin(), fwd.invstd.end());
  const auto dy = random_vec(nx, s + 7);
  std::vector<double> global = oracle::batchnorm_backward_sums(rows, c, x, dy, mean, invstd);
  for (size_t i = 0; i < 2 * static_cast<size_t>(c); ++i) global[i] += 0.25 * static_cast<double>(i) - 1.0;
  global[2 * c] += rows + 2;
  const auto dgamma = random_vec(c, s + 5), dbeta = random_vec(c, s + 6);  // accumulated onto
  add_case({"batchnorm_backward_sums", shape, {}, [=](Run& r) {
    double* d_local = r.upload(std::vector<double>(ns, -1.0));
    r.be.batchnorm_backward_sums(rows, c, r.upload(x), r.upload(dy), r.upload(mean), r.upload(invstd), d_local);
    output_doubles(r, "local sums", d_local, ns, Tol{1e-6, 1e-6});
  }, [=](Run& r) {
    r.output_host("local sums", oracle::batchnorm_backward_sums(rows, c, x, dy, mean, invstd), Tol{1e-6, 1e-6});
  }});
  // The local sums as exact inputs (this rank's share of dgamma and dbeta), apart from the global ones.
  const std::vector<double> local = oracle::batchnorm_backward_sums(rows, c, x, dy, mean, invstd);
  add_case({"batchnorm_backward_from_sums", shape, {}, [=](Run& r) {
    float* d_dx = r.garbage(nx);
    float* d_dgamma = r.upload(dgamma);
    float* d_dbeta = r.upload(dbeta);
    r.be.batchnorm_backward_from_sums(rows, c, r.upload(x), r.upload(dy), r.upload(gamma), r.upload(mean),
                                      r.upload(invstd), r.upload(local), r.upload(global), d_dx, d_dgamma,
                                      d_dbeta);
    r.output("dx", d_dx, nx, Tol{1e-4, 1e-3});
    r.output("dgamma (this rank's share)", d_dgamma, c, Tol{1e-4, 1e-4});
    r.output("dbeta (this rank's share)", d_dbeta, c, Tol{1e-4, 1e-4});
  }, [=](Run& r) {
    const auto o =
        oracle::batchnorm_backward_from_sums(rows, c, x, dy, gamma, mean, invstd, local, global, dgamma, dbeta);
    r.output_host("dx", o.dx, Tol{1e-4, 1e-3});
    r.output_host("dgamma (this rank's share)", o.dgamma, Tol{1e-4, 1e-4});
    r.output_host("dbeta (this rank's share)", o.dbeta, Tol{1e-4, 1e-4});
  }});
}

void add_xent_totals_case() {
  add_case({"softmax_xent_totals", "n 1, 33, 70 classes 7, accumulated", {}, [](Run& r) {
    LossTotals* d_totals = r.upload(std::vector<LossTotals>(1, LossTotals{0.5, 3}));  // added onto
    for (int n : {1, 33, 70}) {
      const int classes = 7;
      std::vector<int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (i * 5 + n) % classes;
      float* d_dz = r.garbage(static_cast<size_t>(n) * classes);
      r.be.softmax_xent_totals(DType::kF32, n, classes,
                               r.upload(random_vec(static_cast<size_t>(n) * classes, 50 + n, -3.f, 3.f)),
                               r.upload(labels), 0.1f, 0.5f, d_dz, d_totals);
      r.output("dlogits n " + std::to_string(n), d_dz, static_cast<size_t>(n) * classes, kDefault);
    }
    const LossTotals t = r.download(d_totals, 1)[0];
    r.output_host("loss sum", {t.loss_sum}, Tol{1e-6, 1e-6});
    r.output_host("correct", {static_cast<double>(t.correct)}, kExact);
  }, [](Run& r) {
    oracle::Xent total{0.5, 3, {}};
    for (int n : {1, 33, 70}) {
      const int classes = 7;
      std::vector<int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = (i * 5 + n) % classes;
      const auto z = widened(random_vec(static_cast<size_t>(n) * classes, 50 + n, -3.f, 3.f));
      const oracle::Xent o = oracle::softmax_xent(n, classes, z, labels, 0.1f, 0.5f);
      r.output_host("dlogits n " + std::to_string(n), o.dlogits, kDefault);
      total.loss_sum += o.loss_sum;
      total.correct += o.correct;
    }
    r.output_host("loss sum", {total.loss_sum}, Tol{1e-6, 1e-6});
    r.output_host("correct", {static_cast<double>(total.correct)}, kExact);
  }});
}

}  // namespace

CNN_SWEEP_CASES(sync) {
  for (int rows : {1, 37, 700})
    for (int c : {5, 45}) {
      const SyncShape h = sync_shape(rows, c);
      add_sync_forward_cases(h);
      add_sync_backward_cases(h);
    }
  add_xent_totals_case();
}

}  // namespace cnn::sweep
