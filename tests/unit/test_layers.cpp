// Layer semantics beyond the gradients (those are checked by finite differences on every backend in
// tests/backend/layer_grad_test.cpp): the residual blocks' parameter names and shortcuts, batch norm
// train-vs-eval behaviour, dropout masks keyed by global sample id, flatten as a view, the option-A shortcut
// and add+ReLU against hand-written values.
#include <cmath>
#include <tuple>

#include "kernels/backend.h"
#include "kernels/batchnorm.h"
#include "kernels/elementwise.h"
#include "src/model/blocks.h"
#include "src/model/layers.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;

Backend* cpu() {
  static auto be = make_cpu_backend(1);
  return be.get();
}

// A layer with its parameters, gradients and buffers in host vectors (the CPU backend's device memory).
struct Bound {
  std::unique_ptr<Layer> layer;
  Dims in, out;
  int n;
  std::vector<std::vector<float>> p, g, b;

  Bound(std::unique_ptr<Layer> l, Dims in_, int n_, uint64_t seed)
      : layer(std::move(l)), in(in_), n(n_) {
    out = layer->setup(in);
    std::vector<float*> pp, gp, bp;
    auto specs = layer->param_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
      // Gammas near 1, as in training; other parameters uniform in [-1, 1].
      p.push_back(specs[i].init == Init::kOne ? random_vec(specs[i].size(), seed + i, 0.5f, 1.5f)
                                              : random_vec(specs[i].size(), seed + i));
      g.push_back(std::vector<float>(specs[i].size(), 0.f));
    }
    for (const auto& s : layer->buffer_specs()) b.push_back(std::vector<float>(s.size(), s.init == Init::kOne));
    for (auto& v : p) pp.push_back(v.data());
    for (auto& v : g) gp.push_back(v.data());
    for (auto& v : b) bp.push_back(v.data());
    layer->bind(pp, gp);
    layer->bind_buffers(bp);
    layer->allocate(*cpu(), n);
  }
};

TEST(Flatten, IsAView) {
  auto l = make_flatten("f");
  EXPECT_EQ(l->setup({3, 4, 5}), (Dims{1, 1, 60}));
  EXPECT_TRUE(l->is_view());
}

// setup() again on the same input (tools read the shapes back after build, as the benchmark's per-layer
// breakdown does) keeps the block as built: the projection shortcut stays allocated and bound, the output is
// the same.
TEST(Blocks, SetupAgainKeepsTheBuiltBlock) {
  Bound b(make_basic_block("b", 6, 2, Shortcut::kProjection), {5, 7, 3}, 2, 31);
  std::vector<float> x = random_vec(b.in.size() * b.n, 32), y1(b.out.size() * b.n), y2(y1.size());
  b.layer->forward(*cpu(), x.data(), y1.data(), b.n, true);
  EXPECT_EQ(b.layer->setup(b.in), b.out);
  b.layer->forward(*cpu(), x.data(), y2.data(), b.n, true);
  EXPECT_EQ(y1, y2);
}

TEST(Blocks, ParameterNamesAndShortcuts) {
  auto b = make_basic_block("b", 8, 2, Shortcut::kProjection);
  b->setup({6, 6, 4});
  std::vector<std::string> names;
  for (const auto& s : b->param_specs()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight",
                                             "bn2.bias", "downsample.0.weight", "downsample.1.weight",
                                             "downsample.1.bias"}));
  EXPECT_EQ(b->buffer_specs().size(), 6u);
  auto pad = make_basic_block("p", 8, 2, Shortcut::kPad);
  EXPECT_EQ(pad->setup({6, 6, 4}), (Dims{3, 3, 8}));
  EXPECT_EQ(pad->param_specs().size(), 6u);
  auto id = make_basic_block("i", 4, 1, Shortcut::kPad);
  id->setup({5, 5, 4});
  EXPECT_NE(id->describe().find("identity"), std::string::npos);
}

TEST(BatchNorm, TrainUsesBatchStatsEvalUsesRunningStats) {
  const int n = 4, c = 3;
  Bound b(make_batchnorm("bn", {0.5f, 1e-5f}), {2, 2, c}, n, 12);
  b.p[0] = {1, 1, 1};
  b.p[1] = {0, 0, 0};
  std::vector<float> x = random_vec(n * 4 * c, 13, -2.f, 3.f), y(x.size());
  b.layer->forward(*cpu(), x.data(), y.data(), n, true);
  // Training output: zero mean, unit (biased) variance per channel.
  const int rows = n * 4;
  std::vector<double> mean(c, 0), var(c, 0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) mean[j] += x[r * c + j] / static_cast<double>(rows);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) var[j] += std::pow(x[r * c + j] - mean[j], 2);
  for (int j = 0; j < c; ++j) {
    double m = 0, v = 0;
    for (int r = 0; r < rows; ++r) m += y[r * c + j] / rows;
    for (int r = 0; r < rows; ++r) v += std::pow(y[r * c + j] - m, 2) / rows;
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v, 1.0, 1e-3);
    // Running statistics moved halfway (momentum 0.5) from (0, 1) towards the batch's (unbiased variance).
    EXPECT_NEAR(b.b[0][j], 0.5 * mean[j], 1e-5);
    EXPECT_NEAR(b.b[1][j], 0.5 + 0.5 * var[j] / (rows - 1), 1e-4);
  }
  // Evaluation: the running statistics, and nothing changes them.
  std::vector<float> rm = b.b[0], rv = b.b[1], ye(x.size());
  b.layer->forward(*cpu(), x.data(), ye.data(), n, false);
  std::vector<double> want(x.size());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < c; ++j) want[r * c + j] = (x[r * c + j] - rm[j]) / std::sqrt(rv[j] + 1e-5);
  EXPECT_TRUE(all_close(ye, want, 1e-5, 1e-5, "eval output"));
  EXPECT_EQ(b.b[0], rm);
  EXPECT_EQ(b.b[1], rv);
  // Evaluating one sample alone gives the same answer as within the batch (no batch dependence).
  std::vector<float> y1(4 * c);
  b.layer->forward(*cpu(), x.data() + 4 * c, y1.data(), 1, false);
  EXPECT_TRUE(all_close(y1, std::vector<float>(ye.begin() + 4 * c, ye.begin() + 8 * c), 0, 0, "single sample"));
}

TEST(Dropout, MaskDependsOnGlobalIdNotPosition) {
  const int n = 4;
  const Dims d{3, 3, 2};
  Bound a(make_dropout("drop", 0.5f), d, n, 1), one(make_dropout("drop", 0.5f), d, 1, 1);
  std::vector<float> x(d.size() * n, 1.f), y(x.size()), y1(d.size());
  std::vector<int64_t> ids = {5, 42, 7, 1000};
  a.layer->set_batch({3, 8, ids.data()});
  a.layer->forward(*cpu(), x.data(), y.data(), n, true);
  // Sample 42 alone (as on another rank) gets the same mask as at position 1 of the batch.
  one.layer->set_batch({3, 8, &ids[1]});
  one.layer->forward(*cpu(), x.data(), y1.data(), 1, true);
  EXPECT_EQ(y1, std::vector<float>(y.begin() + d.size(), y.begin() + 2 * d.size()));
  size_t kept = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.f || v == 2.f) << v;
    kept += v != 0.f;
  }
  EXPECT_GT(kept, y.size() / 4);
  EXPECT_LT(kept, 3 * y.size() / 4);
  // Another step draws another mask; evaluation is the identity.
  a.layer->set_batch({3, 9, ids.data()});
  std::vector<float> y2(x.size());
  a.layer->forward(*cpu(), x.data(), y2.data(), n, true);
  EXPECT_NE(y, y2);
  a.layer->forward(*cpu(), x.data(), y2.data(), n, false);
  EXPECT_EQ(y2, x);
}

TEST(Elementwise, ShortcutPad) {
  // x [1,3,3,2] -> stride 2 -> [1,2,2,4]; odd sizes keep the last row/column (ceil).
  std::vector<float> x(18), y(16), dx(18, 100.f);
  for (int i = 0; i < 18; ++i) x[i] = static_cast<float>(i + 1);
  shortcut_pad_forward_cpu(1, 3, 3, 2, 2, 4, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 2, 0, 0, 5, 6, 0, 0, 13, 14, 0, 0, 17, 18, 0, 0}));
  // Backward adds into dx at the sampled pixels and leaves the others.
  shortcut_pad_backward_add_cpu(1, 3, 3, 2, 2, 4, y.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{101, 102, 100, 100, 105, 106, 100, 100, 100, 100, 100, 100, 113, 114, 100, 100,
                                    117, 118}));
  std::vector<float> a = {1, -2, 0.5f};
  EXPECT_DOUBLE_EQ(sum_squares_cpu(3, a.data()), 1 + 4 + 0.25);
}

// The residual join fused into batch norm: an identity normalisation (gamma 1, beta 0, running mean 0 and
// variance 1 - eps) leaves y = relu(x + residual); training records y > 0 in the mask, and the backward
// hands dy masked by it to both inputs' paths.
TEST(BatchNorm, FusedJoinIsAddRelu) {
  const float eps = 1e-5f;
  std::vector<float> x = {1, -2, 0.5f, 3}, res = {-3, 1, 0.25f, -3}, y(4);
  std::vector<float> gamma = {1, 1}, beta = {0, 0}, rm = {0, 0}, rv = {1 - eps, 1 - eps};
  batchnorm_forward_infer_cpu(2, 2, x.data(), res.data(), gamma.data(), beta.data(), rm.data(), rv.data(), eps, true,
                              y.data());
  EXPECT_TRUE(all_close(y, std::vector<float>{0, 0, 0.75f, 0}, 1e-6, 0, "relu(x + residual)"));
  // Training: columns {1, 0.5} and {-2, 3} normalise to {1, -1} and {-1, 1}; + residual, relu.
  std::vector<float> sm(2), si(2), dx(4), dres(4), dg(2, 0.f), db(2, 0.f);
  std::vector<uint32_t> mask(relu_mask_words(4), 0xffffffffu);
  batchnorm_forward_train_cpu(2, 2, x.data(), res.data(), gamma.data(), beta.data(), 0.f, 0.1f, true, y.data(),
                              mask.data(), sm.data(), si.data(), rm.data(), rv.data());
  EXPECT_TRUE(all_close(y, std::vector<float>{0, 0, 0, 0}, 1e-6, 0, "train y"));
  EXPECT_EQ(mask[0] & 0xfu, 0u);
  std::vector<float> x2 = {1, -2, 0.5f, 3}, res2 = {3, 1, 0.25f, 3};
  batchnorm_forward_train_cpu(2, 2, x2.data(), res2.data(), gamma.data(), beta.data(), 0.f, 0.1f, true, y.data(),
                              mask.data(), sm.data(), si.data(), rm.data(), rv.data());
  EXPECT_TRUE(all_close(y, std::vector<float>{4, 0, 0, 4}, 1e-5, 0, "train y"));
  EXPECT_EQ(mask[0] & 0xfu, 0x9u);
  std::vector<float> dy = {1, 2, 3, 4};
  batchnorm_backward_cpu(2, 2, x2.data(), mask.data(), dy.data(), gamma.data(), sm.data(), si.data(), dx.data(),
                         dres.data(), dg.data(), db.data());
  EXPECT_EQ(dres, (std::vector<float>{1, 0, 0, 4}));
  EXPECT_TRUE(all_close(db, std::vector<float>{1, 4}, 1e-6, 0, "dbeta = column sums of the masked dy"));
}

// A fused batch norm + ReLU layer computes what a batch norm layer followed by a ReLU layer computes.
TEST(BatchNorm, FusedReluMatchesSeparateLayers) {
  const int n = 3;
  const Dims d{4, 3, 5};
  Bound fused(make_batchnorm("bn", {}, true), d, n, 21), plain(make_batchnorm("bn"), d, n, 21);
  auto relu = make_relu("r");
  relu->setup(d);
  std::vector<float> x = random_vec(d.size() * n, 22), dy = random_vec(x.size(), 23);
  std::vector<float> yf(x.size()), yb(x.size()), yr(x.size()), dxf(x.size()), dxr(x.size()), dxb(x.size());
  fused.layer->forward(*cpu(), x.data(), yf.data(), n, true);
  plain.layer->forward(*cpu(), x.data(), yb.data(), n, true);
  relu->forward(*cpu(), yb.data(), yr.data(), n, true);
  EXPECT_TRUE(all_close(yf, yr, 1e-6, 1e-6, "forward"));
  fused.layer->backward(*cpu(), x.data(), yf.data(), dy.data(), dxf.data(), n);
  relu->backward(*cpu(), yb.data(), yr.data(), dy.data(), dxr.data(), n);
  plain.layer->backward(*cpu(), x.data(), yb.data(), dxr.data(), dxb.data(), n);
  EXPECT_TRUE(all_close(dxf, dxb, 1e-5, 1e-5, "dx"));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(all_close(fused.g[i], plain.g[i], 1e-5, 1e-5, "parameter gradient"));
}

// ReLU + max pooling as one layer computes exactly what a ReLU layer followed by a pooling layer computes,
// gradients included (overlapping 3x3 windows, inputs of both signs, all-negative windows).
TEST(MaxPool, FusedReluEqualsSeparateLayers) {
  Backend* be = cpu();
  for (auto [k, stride, pad] : {std::tuple{2, 2, 0}, {3, 2, 1}}) {
    const Dims in{7, 6, 3};
    const int n = 2;
    auto fused = make_maxpool("p", k, stride, pad, true), pool = make_maxpool("p", k, stride, pad);
    auto relu = make_relu("r");
    const Dims out = fused->setup(in);
    pool->setup(in);
    relu->setup(in);
    fused->allocate(*be, n);
    pool->allocate(*be, n);
    std::vector<float> x = random_vec(in.size() * n, 40 + k, -1.5f, 1.f), r(x.size());
    std::vector<float> dy = random_vec(out.size() * n, 50);
    std::vector<float> yf(out.size() * n), yp(yf.size()), dxf(x.size()), dr(x.size()), dxs(x.size());
    fused->forward(*be, x.data(), yf.data(), n, true);
    relu->forward(*be, x.data(), r.data(), n, true);
    pool->forward(*be, r.data(), yp.data(), n, true);
    EXPECT_EQ(yf, yp);
    fused->backward(*be, x.data(), yf.data(), dy.data(), dxf.data(), n);
    pool->backward(*be, r.data(), yp.data(), dy.data(), dr.data(), n);
    relu->backward(*be, x.data(), r.data(), dr.data(), dxs.data(), n);
    EXPECT_EQ(dxf, dxs);
  }
}

}  // namespace
}  // namespace cnn
