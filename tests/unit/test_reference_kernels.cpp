// The reference kernels are the oracle of the backend sweep (tests/backend/): here they are checked on their
// own, against straightforward double-precision loops of the semantics kernels/*.h document (batch norm,
// dropout's keyed masks from the hash's specification, average pooling, the residual element-wise ops, sum of
// squares, the option-A shortcut, AdamW, convolution, ReLU, softmax cross-entropy). Their gradients are checked by finite
// differences in tests/backend/layer_grad_test.cpp.
#include <algorithm>
#include <cmath>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv2d.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/loss.h"
#include "kernels/optimizer.h"
#include "kernels/pooling.h"
#include "kernels/rng.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

TEST(ReferenceKernels, BatchNormTrainInferBackward) {
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
      std::vector<float> got_y(x.size()), got_yi(x.size()), got_dx(x.size()), got_mean(c), got_inv(c);
      batchnorm_forward_infer_cpu(rows, c, x.data(), nullptr, gamma.data(), beta.data(), rm.data(), rv.data(), eps,
                                  false, got_yi.data());
      batchnorm_forward_train_cpu(rows, c, x.data(), nullptr, gamma.data(), beta.data(), eps, mom, false,
                                  got_y.data(), nullptr, got_mean.data(), got_inv.data(), rm.data(), rv.data());
      batchnorm_backward_cpu(rows, c, x.data(), nullptr, dy.data(), gamma.data(), got_mean.data(), got_inv.data(),
                             got_dx.data(), nullptr, dgamma.data(), dbeta.data());
      const std::string what = " rows=" + std::to_string(rows) + " c=" + std::to_string(c);
      // Float outputs of inputs up to ~230 (the channel offsets): y = x*scale + shift rounds at |x| ulp.
      EXPECT_TRUE(all_close(got_yi, yi, 1e-4, 1e-4, "bn infer y" + what));
      EXPECT_TRUE(all_close(got_mean, mean, 1e-5, 1e-6, "bn mean" + what));
      EXPECT_TRUE(all_close(got_inv, invstd, 1e-6, 1e-6, "bn invstd" + what));
      EXPECT_TRUE(all_close(rm, want_rm, 1e-5, 1e-6, "bn running mean" + what));
      EXPECT_TRUE(all_close(rv, want_rv, 1e-5, 1e-6, "bn running var" + what));
      EXPECT_TRUE(all_close(got_y, y, 1e-4, 1e-3, "bn train y" + what));
      EXPECT_TRUE(all_close(dgamma, want_dg, 1e-3, 1e-4, "bn dgamma" + what));
      EXPECT_TRUE(all_close(dbeta, want_db, 1e-3, 1e-4, "bn dbeta" + what));
      EXPECT_TRUE(all_close(got_dx, dx, 1e-3, 1e-3, "bn dx" + what));
    }
}

// The capped ReLU epilogue (BnAct::relu_capped, ReLU6's kind) is the plain batch norm followed by Clip(0, cap):
// the same y bits forward (training and inference), a mask bit set exactly where 0 < v < cap, and a backward
// with that mask equal to the plain backward of dy masked by Clip's derivative, with or without a residual.
TEST(ReferenceKernels, BatchNormCappedReluIsBatchNormThenClip) {
  const int rows = 37, c = 5;
  const float eps = 1e-5f, mom = 0.1f, cap = 0.5f;
  const Activation clip{ActKind::kClip, 0.f, cap};
  const auto x = random_vec(static_cast<size_t>(rows) * c, 11), z = random_vec(x.size(), 12);
  const auto gamma = random_vec(c, 13), beta = random_vec(c, 14), dy = random_vec(x.size(), 15);
  for (const float* residual : {static_cast<const float*>(nullptr), z.data()}) {
    const std::string what = residual ? " with a residual" : "";
    std::vector<float> rm(c, 0.f), rv(c, 1.f), v(x.size()), mean(c), inv(c), want(x.size());
    batchnorm_forward_train_cpu(rows, c, x.data(), residual, gamma.data(), beta.data(), eps, mom, false, v.data(),
                                nullptr, mean.data(), inv.data(), rm.data(), rv.data());
    activation_forward_cpu(clip, v.size(), v.data(), want.data());
    std::vector<float> got(x.size(), -1.f), rm2(c, 0.f), rv2(c, 1.f), mean2(c), inv2(c);
    std::vector<uint32_t> mask(relu_mask_words(x.size()), 0xffffffffu);
    batchnorm_forward_train_cpu(rows, c, x.data(), residual, gamma.data(), beta.data(), eps, mom,
                                BnAct::relu_capped(cap), got.data(), mask.data(), mean2.data(), inv2.data(),
                                rm2.data(), rv2.data());
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(mean2, mean);
    EXPECT_EQ(rv2, rv);
    int clipped_low = 0, clipped_high = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(mask[i / 32] >> (i % 32) & 1u, v[i] > 0.f && v[i] < cap ? 1u : 0u) << "element " << i << what;
      clipped_low += v[i] <= 0.f;
      clipped_high += v[i] >= cap;
    }
    EXPECT_GT(clipped_low, 0);  // both bounds are exercised
    EXPECT_GT(clipped_high, 0);
    std::vector<float> yi(x.size()), yi_want(x.size());
    batchnorm_forward_infer_cpu(rows, c, x.data(), residual, gamma.data(), beta.data(), rm.data(), rv.data(), eps,
                                false, yi_want.data());
    activation_forward_cpu(clip, yi_want.size(), yi_want.data(), yi_want.data());
    batchnorm_forward_infer_cpu(rows, c, x.data(), residual, gamma.data(), beta.data(), rm.data(), rv.data(), eps,
                                BnAct::relu_capped(cap), yi.data());
    EXPECT_EQ(yi, yi_want) << what;
    // Backward: the fused mask against Clip's derivative taken from v.
    std::vector<float> g(x.size()), dx_want(x.size()), dx(x.size()), dz(x.size());
    activation_backward_cpu(clip, v.size(), v.data(), dy.data(), g.data(), false);
    std::vector<float> dg_want(c, 0.f), db_want(c, 0.f), dg(c, 0.f), db(c, 0.f);
    batchnorm_backward_cpu(rows, c, x.data(), nullptr, g.data(), gamma.data(), mean.data(), inv.data(),
                           dx_want.data(), nullptr, dg_want.data(), db_want.data());
    batchnorm_backward_cpu(rows, c, x.data(), mask.data(), dy.data(), gamma.data(), mean.data(), inv.data(), dx.data(),
                           dz.data(), dg.data(), db.data());
    EXPECT_EQ(dx, dx_want) << what;
    EXPECT_EQ(dz, g) << what;
    EXPECT_EQ(dg, dg_want) << what;
    EXPECT_EQ(db, db_want) << what;
  }
}

// Dropout's keep bits from their specification (kernels/dropout.h), written here without kernels/rng.h: the
// SplitMix64 finaliser, anchored to the generator's published first outputs, then the documented composition.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool spec_keep(uint64_t key, int64_t id, uint64_t j, float p) {
  const uint64_t sample_key = splitmix64(splitmix64(splitmix64(splitmix64(key) ^ static_cast<uint64_t>(id))));
  const uint64_t bits = splitmix64(sample_key ^ splitmix64(j));
  return static_cast<double>(bits >> 40) / 16777216.0 >= p;  // top 24 bits as a fraction of 1
}

TEST(ReferenceKernels, DropoutSpecificationAnchors) {
  // SplitMix64 seeded with 0 (Steele, Lea and Flood 2014) starts 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
  // 0x06c45d188009454f: its state advances by the golden gamma before each finalisation.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64(2 * 0x9e3779b97f4a7c15ull), 0x06c45d188009454full);
  // The first 64 keep bits (bit j = element j) of three (key, id, p), computed from the specification apart
  // from this file (a Python transcription of it).
  struct Known {
    uint64_t key;
    int64_t id;
    float p;
    uint64_t bits;
  };
  for (const Known& k : {Known{0x5eed, 7, 0.3f, 0x9ebd357e8fbe5e2aull},
                         Known{0x5eed, 123456789, 0.3f, 0x6afbeff7fee7eedbull},
                         Known{1, 0, 0.5f, 0x17625595f6812bbfull}}) {
    std::vector<float> x(64, 1.f), y(64);
    std::vector<uint8_t> mask(64);
    dropout_forward_cpu(1, 64, x.data(), k.p, k.key, &k.id, y.data(), mask.data());
    uint64_t got = 0, spec = 0;
    for (uint64_t j = 0; j < 64; ++j) {
      got |= static_cast<uint64_t>(mask[j]) << j;
      spec |= static_cast<uint64_t>(spec_keep(k.key, k.id, j, k.p)) << j;
    }
    EXPECT_EQ(got, k.bits) << "key " << k.key << " id " << k.id;
    EXPECT_EQ(spec, k.bits) << "the specification's transcription here";
  }
}

TEST(ReferenceKernels, DropoutMasksFollowTheSpecification) {
  const int n = 5;
  const size_t per = 1001;
  const float p = 0.3f;
  const uint64_t key = 0x5eed;
  auto x = random_vec(n * per, 11), dy = random_vec(n * per, 12);
  std::vector<int64_t> ids = {7, 123456789, 0, 42, 99};
  std::vector<double> y(x.size()), dx(x.size());
  std::vector<uint8_t> mask(x.size());
  size_t kept = 0;
  for (int s = 0; s < n; ++s)
    for (size_t j = 0; j < per; ++j) {
      const size_t i = s * per + j;
      mask[i] = spec_keep(key, ids[s], j, p);
      y[i] = mask[i] ? x[i] / (1.0 - p) : 0.0;
      dx[i] = mask[i] ? dy[i] / (1.0 - p) : 0.0;
      kept += mask[i];
    }
  // Binomial(5005, 0.7): the fraction kept within 4.5 standard deviations (0.029).
  EXPECT_NEAR(static_cast<double>(kept) / x.size(), 1 - p, 0.03);
  std::vector<float> got_y(x.size()), got_dx(x.size());
  std::vector<uint8_t> got_mask(x.size());
  dropout_forward_cpu(n, per, x.data(), p, key, ids.data(), got_y.data(), got_mask.data());
  dropout_backward_cpu(x.size(), p, dy.data(), got_mask.data(), got_dx.data());
  EXPECT_EQ(got_mask, mask);
  // One float rounding of x * (1 / (1 - p)) apart from the exact quotient.
  EXPECT_TRUE(all_close(got_y, y, 0, 2e-7, "dropout y"));
  EXPECT_TRUE(all_close(got_dx, dx, 0, 2e-7, "dropout dx"));
  // A sample's mask moves with its id: reversed in the batch, the rows come back reversed.
  std::vector<int64_t> rev(ids.rbegin(), ids.rend());
  std::vector<uint8_t> rev_mask(x.size());
  dropout_forward_cpu(n, per, x.data(), p, key, rev.data(), got_y.data(), rev_mask.data());
  for (int s = 0; s < n; ++s)
    EXPECT_TRUE(std::equal(rev_mask.begin() + (n - 1 - s) * per, rev_mask.begin() + (n - s) * per,
                           mask.begin() + s * per))
        << "sample id " << ids[s];
}

TEST(ReferenceKernels, AvgPoolIncludingGlobal) {
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
    std::vector<float> got_y(y.size()), got_dx(x.size(), 7.f);  // dx is overwritten
    avgpool_forward_cpu(d, x.data(), got_y.data());
    avgpool_backward_cpu(d, dy.data(), got_dx.data());
    EXPECT_TRUE(all_close(got_y, y, 1e-6, 1e-5, "avgpool y k=" + std::to_string(t.k)));
    EXPECT_TRUE(all_close(got_dx, dx, 1e-6, 1e-5, "avgpool dx k=" + std::to_string(t.k)));
  }
}

TEST(ReferenceKernels, ElementwiseAndSumOfSquares) {
  const size_t n = 70001;  // wraps the grid-stride loops
  auto a = random_vec(n, 40), b = random_vec(n, 41);
  std::vector<double> axpy(n), scaled(n);
  double ss = 0.25;
  for (size_t i = 0; i < n; ++i) {
    axpy[i] = b[i] + 0.5 * a[i];
    scaled[i] = -3.0 * a[i];
    ss += static_cast<double>(a[i]) * a[i];
  }
  EXPECT_NEAR(0.25 + sum_squares_cpu(n, a.data()), ss, 1e-9 * ss);
  axpy_cpu(n, 0.5f, a.data(), b.data());
  EXPECT_TRUE(all_close(b, axpy, 1e-6, 1e-6, "axpy"));
  scale_cpu(n, -3.f, a.data());
  EXPECT_TRUE(all_close(a, scaled, 1e-6, 1e-6, "scale"));
}

TEST(ReferenceKernels, ShortcutPad) {
  for (int stride : {1, 2})
    for (int h : {7, 8}) {
      const int n = 2, w = h + 1, c = 3, k = 8, P = (h + stride - 1) / stride, Q = (w + stride - 1) / stride;
      auto x = random_vec(static_cast<size_t>(n) * h * w * c, 50 + h);
      auto dy = random_vec(static_cast<size_t>(n) * P * Q * k, 60 + h);
      std::vector<float> y(dy.size(), 0.f), dx = random_vec(x.size(), 70), got_dx = dx;  // backward adds into dx
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q)
            for (int ch = 0; ch < c; ++ch) {
              const size_t o = ((static_cast<size_t>(i) * P + p) * Q + q) * k + ch;
              const size_t s = ((static_cast<size_t>(i) * h + p * stride) * w + q * stride) * c + ch;
              y[o] = x[s];
              dx[s] += dy[o];
            }
      std::vector<float> got_y(y.size(), 7.f);  // overwritten
      shortcut_pad_forward_cpu(n, h, w, c, stride, k, x.data(), got_y.data());
      shortcut_pad_backward_add_cpu(n, h, w, c, stride, k, dy.data(), got_dx.data());
      EXPECT_TRUE(all_close(got_y, y, 0, 0, "shortcut pad y"));
      EXPECT_TRUE(all_close(got_dx, dx, 0, 0, "shortcut pad dx"));
    }
}

TEST(ReferenceKernels, AdamWTwoSteps) {
  const size_t n = 5003;
  auto w = random_vec(n, 80), g = random_vec(n, 81), m = random_vec(n, 82), v = random_vec(n, 83, 0.f, 1.f);
  std::vector<double> want_w(w.begin(), w.end()), want_m(m.begin(), m.end()), want_v(v.begin(), v.end());
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  for (int t = 1; t <= 2; ++t) {
    const float bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < n; ++i) {
      want_m[i] = b1 * want_m[i] + (1.0 - b1) * g[i];
      want_v[i] = b2 * want_v[i] + (1.0 - b2) * g[i] * g[i];
      want_w[i] -= lr * (wd * want_w[i] + (want_m[i] / bc1) / (std::sqrt(want_v[i] / bc2) + eps));
    }
    adamw_update_cpu(n, w.data(), g.data(), m.data(), v.data(), lr, b1, b2, eps, wd, bc1, bc2);
  }
  EXPECT_TRUE(all_close(w, want_w, 1e-6, 1e-5, "adamw w"));
  EXPECT_TRUE(all_close(m, want_m, 1e-7, 1e-5, "adamw m"));
  EXPECT_TRUE(all_close(v, want_v, 1e-7, 1e-5, "adamw v"));
}

TEST(ReferenceKernels, ReluBothHalves) {
  std::vector<float> x = {-2, -0.5f, 0.5f, 3}, y(4), dy = {1, 2, 3, 4}, dx(4);
  relu_forward_cpu(4, x.data(), y.data());
  relu_backward_cpu(4, y.data(), dy.data(), dx.data());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0.5f, 3}));
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 3, 4}));
}

TEST(ReferenceKernels, SoftmaxCrossEntropyIsTheTextbookFormula) {
  const int n = 5, k = 7;
  std::vector<float> z = random_vec(n * k, 11, -3.f, 3.f), dz(n * k);
  std::vector<int32_t> y = {0, 6, 3, 3, 1};
  const float scale = 0.25f, eps = 0.1f;
  double s = 0;
  int64_t c = 0;
  softmax_xent_cpu(n, k, z.data(), y.data(), eps, scale, dz.data(), &s, &c);
  double want = 0;
  int64_t want_c = 0;
  std::vector<double> want_dz(n * k);
  for (int i = 0; i < n; ++i) {
    double m = -1e30, sum = 0;
    int arg = 0;
    for (int j = 0; j < k; ++j)
      if (z[i * k + j] > m) m = z[i * k + j], arg = j;
    for (int j = 0; j < k; ++j) sum += std::exp(z[i * k + j] - m);
    for (int j = 0; j < k; ++j) {
      const double t = (j == y[i] ? 1 - eps : 0) + eps / k;
      want -= t * (z[i * k + j] - m - std::log(sum));
      want_dz[i * k + j] = scale * (std::exp(z[i * k + j] - m) / sum - t);  // softmax minus target
    }
    want_c += arg == y[i];
  }
  EXPECT_NEAR(s, want, 1e-5 * std::fabs(want));
  EXPECT_EQ(c, want_c);
  EXPECT_TRUE(all_close(dz, want_dz, 1e-7, 1e-5, "dlogits"));
}

TEST(ReferenceKernels, ConvForwardIsDirectLoops) {
  ConvDesc d;
  d.n = 2, d.h = 9, d.w = 7, d.c = 3, d.k = 5, d.r = 3, d.s = 2, d.stride_h = 2, d.stride_w = 1, d.pad_h = 1,
  d.pad_w = 1;
  auto x = random_vec(static_cast<size_t>(d.n) * d.h * d.w * d.c, 21);
  auto w = random_vec(static_cast<size_t>(d.k) * d.r * d.s * d.c, 22);
  auto b = random_vec(d.k, 23);
  std::vector<float> y(static_cast<size_t>(d.n) * d.p() * d.q() * d.k);
  conv2d_forward_cpu(d, x.data(), w.data(), b.data(), y.data());
  std::vector<double> ref(y.size());
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < d.p(); ++p)
      for (int q = 0; q < d.q(); ++q)
        for (int k = 0; k < d.k; ++k) {
          double acc = b[k];
          for (int r = 0; r < d.r; ++r)
            for (int s = 0; s < d.s; ++s)
              for (int c = 0; c < d.c; ++c) {
                int h = p * d.stride_h - d.pad_h + r, ww = q * d.stride_w - d.pad_w + s;
                if (h < 0 || h >= d.h || ww < 0 || ww >= d.w) continue;
                acc += static_cast<double>(x[((n * d.h + h) * d.w + ww) * d.c + c]) * w[((k * d.r + r) * d.s + s) * d.c + c];
              }
          ref[((n * d.p() + p) * d.q() + q) * d.k + k] = acc;
        }
  EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-5, "conv forward"));
}

}  // namespace
}  // namespace cnn::test
