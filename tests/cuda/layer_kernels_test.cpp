// The CUDA kernels for the layer set of the layer/zoo issue (batch norm, dropout, average pooling, residual
// element-wise ops, gradient-norm reduction, AdamW), called through their launchers under the emulator and
// compared with double-precision loops of the CPU references' semantics. Until that Backend ops land
// (and the comparisons move to the CPU backend, as in kernels_test.cpp), these are their tests.
#include <cmath>

#include "kernels/cuda_ops.h"
#include "kernels/rng.h"
#include "tests/cuda/cuda_test_util.h"

namespace cnn::test {
namespace {

namespace dev = ::cnn::emu;

// A cudaMalloc'd copy of a host vector, freed by the destructor.
template <class T>
class DeviceVec {
 public:
  explicit DeviceVec(const std::vector<T>& h) : n_(h.size()) {
    EXPECT_EQ(cudaMalloc(&p_, sizeof(T) * (n_ ? n_ : 1)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, h.data(), sizeof(T) * n_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceVec(size_t n) : DeviceVec(std::vector<T>(n)) {}
  ~DeviceVec() { cudaFree(p_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return p_; }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, sizeof(T) * n_, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

class LayerKernels : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override { simt::set_schedule_seed(GetParam()); }
  void TearDown() override { simt::set_schedule_seed(0); }
};

#define ASSERT_LAUNCH(expr) ASSERT_EQ((expr), cudaSuccess) << simt::last_error_message()

TEST_P(LayerKernels, BatchNormTrainInferBackward) {
  for (int rows : {2, 37, 1100})
    for (int c : {3, 45}) {
      auto x = random_vec(static_cast<size_t>(rows) * c, rows + c);
      for (size_t i = 0; i < x.size(); ++i) x[i] += 5.f * static_cast<float>(i % c);  // large channel means
      auto gamma = random_vec(c, 1), beta = random_vec(c, 2), rm = random_vec(c, 3), rv = random_vec(c, 4, 0.5f, 2.f);
      auto dy = random_vec(x.size(), 5), dgamma = random_vec(c, 6), dbeta = random_vec(c, 7);
      const float eps = 1e-5f, mom = 0.1f;
      // Reference in double.
      std::vector<double> mean(c), var(c), y(x.size()), yi(x.size()), dx(x.size()), want_rm(c), want_rv(c);
      std::vector<double> want_dg(dgamma.begin(), dgamma.end()), want_db(dbeta.begin(), dbeta.end()), invstd(c);
      for (int j = 0; j < c; ++j) {
        for (int r = 0; r < rows; ++r) mean[j] += x[r * c + j];
        mean[j] /= rows;
        for (int r = 0; r < rows; ++r) var[j] += (x[r * c + j] - mean[j]) * (x[r * c + j] - mean[j]);
        invstd[j] = 1.0 / std::sqrt(var[j] / rows + eps);
        want_rm[j] = (1 - mom) * rm[j] + mom * mean[j];
        want_rv[j] = (1 - mom) * rv[j] + mom * (rows > 1 ? var[j] / (rows - 1) : var[j] / rows);
        double sdy = 0, sdyx = 0;
        for (int r = 0; r < rows; ++r) {
          const size_t i = static_cast<size_t>(r) * c + j;
          const double xhat = (x[i] - mean[j]) * invstd[j];
          y[i] = gamma[j] * xhat + beta[j];
          yi[i] = gamma[j] * (x[i] - rm[j]) / std::sqrt(rv[j] + eps) + beta[j];
          sdy += dy[i];
          sdyx += dy[i] * xhat;
        }
        want_dg[j] += sdyx;
        want_db[j] += sdy;
        for (int r = 0; r < rows; ++r) {
          const size_t i = static_cast<size_t>(r) * c + j;
          dx[i] = gamma[j] * invstd[j] * (dy[i] - sdy / rows - (x[i] - mean[j]) * invstd[j] * sdyx / rows);
        }
      }
      DeviceVec<float> d_x(x), d_g(gamma), d_b(beta), d_rm(rm), d_rv(rv), d_dy(dy), d_dg(dgamma), d_db(dbeta);
      DeviceVec<float> d_y(x.size()), d_yi(x.size()), d_dx(x.size()), d_mean(c), d_inv(c);
      DeviceVec<char> d_work(dev::batchnorm_work_bytes(c));
      ASSERT_LAUNCH(dev::batchnorm_forward_infer_cuda(rows, c, d_x.get(), d_g.get(), d_b.get(), d_rm.get(), d_rv.get(),
                                                      eps, d_yi.get(), d_work.get(), nullptr));
      ASSERT_LAUNCH(dev::batchnorm_forward_train_cuda(rows, c, d_x.get(), d_g.get(), d_b.get(), eps, mom, d_y.get(),
                                                      d_mean.get(), d_inv.get(), d_rm.get(), d_rv.get(),
                                                      d_work.get(), nullptr));
      ASSERT_LAUNCH(dev::batchnorm_backward_cuda(rows, c, d_x.get(), d_dy.get(), d_g.get(), d_mean.get(), d_inv.get(),
                                                 d_dx.get(), d_dg.get(), d_db.get(), d_work.get(), nullptr));
      const std::string what = " rows=" + std::to_string(rows) + " c=" + std::to_string(c);
      EXPECT_TRUE(all_close(d_yi.host(), yi, 1e-4, 1e-4, "bn infer y" + what));
      EXPECT_TRUE(all_close(d_mean.host(), mean, 1e-5, 1e-5, "bn mean" + what));
      EXPECT_TRUE(all_close(d_inv.host(), invstd, 1e-4, 1e-4, "bn invstd" + what));
      EXPECT_TRUE(all_close(d_rm.host(), want_rm, 1e-5, 1e-5, "bn running mean" + what));
      EXPECT_TRUE(all_close(d_rv.host(), want_rv, 1e-4, 1e-4, "bn running var" + what));
      EXPECT_TRUE(all_close(d_y.host(), y, 1e-4, 1e-3, "bn train y" + what));
      EXPECT_TRUE(all_close(d_dg.host(), want_dg, 1e-3, 1e-4, "bn dgamma" + what));
      EXPECT_TRUE(all_close(d_db.host(), want_db, 1e-3, 1e-4, "bn dbeta" + what));
      EXPECT_TRUE(all_close(d_dx.host(), dx, 1e-3, 1e-3, "bn dx" + what));
    }
}

TEST_P(LayerKernels, DropoutMasksAreTheReferenceHash) {
  const int n = 5;
  const size_t per = 1001;
  const float p = 0.3f;
  const uint64_t key = 0x5eed;
  auto x = random_vec(n * per, 11), dy = random_vec(n * per, 12);
  std::vector<int64_t> ids = {7, 123456789, 0, 42, 99};
  std::vector<float> y(x.size()), dx(x.size());
  std::vector<uint8_t> mask(x.size());
  size_t kept = 0;
  for (int s = 0; s < n; ++s)
    for (size_t j = 0; j < per; ++j) {
      const size_t i = s * per + j;
      mask[i] = uniform01(mix64(hash_key(key, static_cast<uint64_t>(ids[s])) ^ mix64(j))) >= p;
      y[i] = mask[i] ? x[i] * (1.0f / (1.0f - p)) : 0.f;
      dx[i] = mask[i] ? dy[i] * (1.0f / (1.0f - p)) : 0.f;
      kept += mask[i];
    }
  EXPECT_NEAR(static_cast<double>(kept) / x.size(), 1 - p, 0.03);
  DeviceVec<float> d_x(x), d_y(x.size()), d_dy(dy), d_dx(x.size());
  DeviceVec<int64_t> d_ids(ids);
  DeviceVec<uint8_t> d_mask(x.size());
  ASSERT_LAUNCH(dev::dropout_forward_cuda(n, per, d_x.get(), p, key, d_ids.get(), d_y.get(), d_mask.get(), nullptr));
  ASSERT_LAUNCH(dev::dropout_backward_cuda(x.size(), p, d_dy.get(), d_mask.get(), d_dx.get(), nullptr));
  EXPECT_EQ(d_mask.host(), mask);
  EXPECT_TRUE(all_close(d_y.host(), y, 0, 0, "dropout y"));
  EXPECT_TRUE(all_close(d_dx.host(), dx, 0, 0, "dropout dx"));
}

TEST_P(LayerKernels, AvgPoolIncludingGlobal) {
  struct Case {
    int n, h, w, c, k, stride, pad;
  };
  for (const Case& t : {Case{2, 7, 9, 5, 2, 2, 0}, Case{2, 9, 8, 33, 3, 2, 1}, Case{3, 5, 6, 7, 5, 1, 0},
                        Case{2, 8, 8, 40, 8, 1, 0}}) {  // the last: global average pooling
    PoolDesc d;
    d.n = t.n, d.h = t.h, d.w = t.w, d.c = t.c, d.r = d.s = t.k, d.stride = t.stride, d.pad = t.pad;
    const int P = d.p(), Q = d.q();
    auto x = random_vec(static_cast<size_t>(t.n) * t.h * t.w * t.c, 20 + t.k);
    auto dy = random_vec(static_cast<size_t>(t.n) * P * Q * t.c, 30 + t.k);
    std::vector<double> y(dy.size()), dx(x.size());
    for (int n = 0; n < t.n; ++n)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          int taps = 0;
          for (int pass = 0; pass < 2; ++pass)  // count the taps, then spread
            for (int r = 0; r < t.k; ++r)
              for (int s = 0; s < t.k; ++s) {
                const int h = p * t.stride - t.pad + r, w = q * t.stride - t.pad + s;
                if (h < 0 || h >= t.h || w < 0 || w >= t.w) continue;
                if (pass == 0) {
                  ++taps;
                  continue;
                }
                for (int c = 0; c < t.c; ++c) {
                  const size_t o = ((static_cast<size_t>(n) * P + p) * Q + q) * t.c + c;
                  const size_t i = ((static_cast<size_t>(n) * t.h + h) * t.w + w) * t.c + c;
                  y[o] += x[i] / taps;
                  dx[i] += dy[o] / taps;
                }
              }
        }
    DeviceVec<float> d_x(x), d_y(y.size()), d_dy(dy), d_dx(x.size());
    ASSERT_LAUNCH(dev::avgpool_forward_cuda(d, d_x.get(), d_y.get(), nullptr));
    ASSERT_LAUNCH(dev::avgpool_backward_cuda(d, d_dy.get(), d_dx.get(), nullptr));
    EXPECT_TRUE(all_close(d_y.host(), y, 1e-6, 1e-5, "avgpool y k=" + std::to_string(t.k)));
    EXPECT_TRUE(all_close(d_dx.host(), dx, 1e-6, 1e-5, "avgpool dx k=" + std::to_string(t.k)));
  }
}

TEST_P(LayerKernels, ElementwiseAndSumOfSquares) {
  const size_t n = 70001;  // wraps the grid-stride loops
  auto a = random_vec(n, 40), b = random_vec(n, 41);
  std::vector<double> relu(n), axpy(n), scaled(n);
  double ss = 0.25;
  for (size_t i = 0; i < n; ++i) {
    relu[i] = std::max(0.f, a[i] + b[i]);
    axpy[i] = b[i] + 0.5 * a[i];
    scaled[i] = -3.0 * a[i];
    ss += static_cast<double>(a[i]) * a[i];
  }
  DeviceVec<float> d_a(a), d_b(b), d_y(n);
  DeviceVec<double> d_ss(std::vector<double>{0.25});
  ASSERT_LAUNCH(dev::add_relu_forward_cuda(n, d_a.get(), d_b.get(), d_y.get(), nullptr));
  EXPECT_TRUE(all_close(d_y.host(), relu, 0, 0, "add_relu"));
  ASSERT_LAUNCH(dev::sum_squares_cuda(n, d_a.get(), d_ss.get(), nullptr));
  EXPECT_NEAR(d_ss.host()[0], ss, 1e-9 * ss);
  ASSERT_LAUNCH(dev::axpy_cuda(n, 0.5f, d_a.get(), d_b.get(), nullptr));
  EXPECT_TRUE(all_close(d_b.host(), axpy, 1e-6, 1e-6, "axpy"));
  ASSERT_LAUNCH(dev::scale_cuda(n, -3.f, d_a.get(), nullptr));
  EXPECT_TRUE(all_close(d_a.host(), scaled, 1e-6, 1e-6, "scale"));
}

TEST_P(LayerKernels, ShortcutPad) {
  for (int stride : {1, 2})
    for (int h : {7, 8}) {
      const int n = 2, w = h + 1, c = 3, k = 8, P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
      auto x = random_vec(static_cast<size_t>(n) * h * w * c, 50 + h);
      auto dy = random_vec(static_cast<size_t>(n) * P * Q * k, 60 + h);
      std::vector<float> y(dy.size(), 0.f), dx(x.size(), 0.f);
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q)
            for (int ch = 0; ch < c; ++ch) {
              const size_t o = ((static_cast<size_t>(i) * P + p) * Q + q) * k + ch;
              const size_t s = ((static_cast<size_t>(i) * h + p * stride) * w + q * stride) * c + ch;
              y[o] = x[s];
              dx[s] = dy[o];
            }
      DeviceVec<float> d_x(x), d_y(y.size()), d_dy(dy), d_dx(random_vec(x.size(), 70));
      ASSERT_LAUNCH(dev::shortcut_pad_forward_cuda(n, h, w, c, stride, k, d_x.get(), d_y.get(), nullptr));
      ASSERT_LAUNCH(dev::shortcut_pad_backward_cuda(n, h, w, c, stride, k, d_dy.get(), d_dx.get(), nullptr));
      EXPECT_TRUE(all_close(d_y.host(), y, 0, 0, "shortcut pad y"));
      EXPECT_TRUE(all_close(d_dx.host(), dx, 0, 0, "shortcut pad dx"));
    }
}

TEST_P(LayerKernels, AdamW) {
  const size_t n = 5003;
  auto w = random_vec(n, 80), g = random_vec(n, 81), m = random_vec(n, 82), v = random_vec(n, 83, 0.f, 1.f);
  DeviceVec<float> d_w(w), d_g(g), d_m(m), d_v(v);
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  for (int t = 1; t <= 2; ++t) {
    const float bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (wd * w[i] + (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps));
    }
    ASSERT_LAUNCH(dev::adamw_update_cuda(n, d_w.get(), d_g.get(), d_m.get(), d_v.get(), lr, b1, b2, eps, wd, bc1, bc2,
                                         nullptr));
  }
  EXPECT_TRUE(all_close(d_w.host(), w, 1e-6, 1e-5, "adamw w"));
  EXPECT_TRUE(all_close(d_m.host(), m, 1e-6, 1e-5, "adamw m"));
  EXPECT_TRUE(all_close(d_v.host(), v, 1e-6, 1e-5, "adamw v"));
}

INSTANTIATE_TEST_SUITE_P(Schedules, LayerKernels, ::testing::ValuesIn(kSchedules),
                         [](const ::testing::TestParamInfo<uint64_t>& i) {
                           return i.param == 0 ? std::string("default") : "seed" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace cnn::test
