// Sweep cases: the data-parallel ops (kernels/batchnorm_sync.h, Backend::softmax_xent_totals). Synchronised
// batch norm's split passes get statistics summed over two "ranks", as an allreduce would leave them; the
// loss totals accumulate on the device across calls.
#include "kernels/batchnorm_sync.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

// Channel j's values are offset by 5j: large means expose cancellation in the one-pass variance.
std::vector<float> sync_input(int rows, int c, uint64_t seed) {
  auto x = random_vec(static_cast<size_t>(rows) * c, seed);
  for (size_t i = 0; i < x.size(); ++i) x[i] += 5.f * static_cast<float>(i % c);
  return x;
}

// This rank's statistics plus another rank's (rows + 2 rows of other data): what the allreduce returns.
std::vector<double> global_stats(int rows, int c, uint64_t s) {
  std::vector<double> mine(2 * c + 1), other(2 * c + 1);
  batchnorm_stats_cpu(rows, c, sync_input(rows, c, s).data(), mine.data());
  batchnorm_stats_cpu(rows + 2, c, sync_input(rows + 2, c, s + 50).data(), other.data());
  for (size_t i = 0; i < mine.size(); ++i) mine[i] += other[i];
  return mine;
}

void output_doubles(Run& r, const std::string& name, const double* d, size_t n, Tol t) {
  const auto v = r.download(d, n);
  r.output_host(name, std::vector<double>(v.begin(), v.end()), t);
}

}  // namespace

CNN_SWEEP_CASES(sync) {
  const float eps = 1e-5f, momentum = 0.1f;
  for (int rows : {1, 37, 700})
    for (int c : {5, 45}) {
      const std::string shape = "rows " + std::to_string(rows) + " c " + std::to_string(c);
      const size_t nx = static_cast<size_t>(rows) * c, ns = 2 * static_cast<size_t>(c) + 1;
      const uint64_t s = 3000 + rows * 100 + c;
      add_case({"batchnorm_stats", shape, {}, [=](Run& r) {
        double* d_stats = r.upload(std::vector<double>(ns, -1.0));
        r.be.batchnorm_stats(rows, c, r.upload(sync_input(rows, c, s)), d_stats);
        // Double sums of up to 700 floats of size 1-250: only the summation order differs.
        output_doubles(r, "stats", d_stats, ns, Tol{1e-9, 1e-12});
      }});
      add_case({"batchnorm_forward_from_stats", shape, {}, [=](Run& r) {
        float* d_y = r.garbage(nx);
        float *d_mean = r.garbage(c), *d_invstd = r.garbage(c);
        float* d_rm = r.upload(random_vec(c, s + 1));
        float* d_rv = r.upload(random_vec(c, s + 2, 0.5f, 2.f));
        r.be.batchnorm_forward_from_stats(rows, c, r.upload(sync_input(rows, c, s)), r.upload(global_stats(rows, c, s)),
                                          r.upload(random_vec(c, s + 3)), r.upload(random_vec(c, s + 4)), eps,
                                          momentum, d_y, d_mean, d_invstd, d_rm, d_rv);
        r.output("y", d_y, nx, kDefault);
        r.output("save_mean", d_mean, c, kDefault);
        r.output("save_invstd", d_invstd, c, kDefault);
        r.output("running_mean", d_rm, c, kDefault);
        r.output("running_var", d_rv, c, kDefault);
      }});
      add_case({"batchnorm_backward_sums", shape, {"batchnorm_backward_from_sums"}, [=](Run& r) {
        // The saved statistics of the reference's forward pass over both ranks' data.
        const auto x = sync_input(rows, c, s);
        const auto stats = global_stats(rows, c, s);
        const auto gamma = random_vec(c, s + 3);
        std::vector<float> y(nx), mean(c), invstd(c), rm(c, 0.f), rv(c, 1.f);
        batchnorm_forward_from_stats_cpu(rows, c, x.data(), stats.data(), gamma.data(), random_vec(c, s + 4).data(),
                                         eps, momentum, y.data(), mean.data(), invstd.data(), rm.data(), rv.data());
        const auto dy = random_vec(nx, s + 7);
        float *d_x = r.upload(x), *d_dy = r.upload(dy), *d_mean = r.upload(mean), *d_invstd = r.upload(invstd);
        double* d_local = r.upload(std::vector<double>(ns, -1.0));
        r.be.batchnorm_backward_sums(rows, c, d_x, d_dy, d_mean, d_invstd, d_local);
        output_doubles(r, "local sums", d_local, ns, Tol{1e-6, 1e-6});
        // The sums the allreduce would return: this rank's plus made-up ones of another rank.
        std::vector<double> global(ns);
        batchnorm_backward_sums_cpu(rows, c, x.data(), dy.data(), mean.data(), invstd.data(), global.data());
        for (size_t i = 0; i < 2 * static_cast<size_t>(c); ++i) global[i] += 0.25 * static_cast<double>(i) - 1.0;
        global[2 * c] += rows + 2;
        float* d_dx = r.garbage(nx);
        float* d_dgamma = r.upload(random_vec(c, s + 5));  // accumulated onto
        float* d_dbeta = r.upload(random_vec(c, s + 6));
        r.be.batchnorm_backward_from_sums(rows, c, d_x, d_dy, r.upload(gamma), d_mean, d_invstd, d_local,
                                          r.upload(global), d_dx, d_dgamma, d_dbeta);
        r.output("dx", d_dx, nx, Tol{1e-4, 1e-3});
        r.output("dgamma (this rank's share)", d_dgamma, c, Tol{1e-4, 1e-4});
        r.output("dbeta (this rank's share)", d_dbeta, c, Tol{1e-4, 1e-4});
      }});
    }
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
  }});
}

}  // namespace cnn::sweep
