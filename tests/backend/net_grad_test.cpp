// Finite-difference checks of the loss and of a whole net (Net::backward through several layers into the
// flat gradient buffer) on every backend of the sweep, with the shared checker of tests/common/fd_check.h.
#include <cmath>

#include "kernels/rng.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "tests/common/backend_targets.h"
#include "tests/common/fd_check.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

std::vector<BackendTarget> targets() {
  std::vector<BackendTarget> v = {{"reference", TargetKind::kReference}};
  for (const auto& t : backend_targets(1)) v.push_back(t);
  return v;
}

class NetGrad : public ::testing::TestWithParam<BackendTarget> {
 protected:
  void SetUp() override {
    tb_ = std::make_unique<TargetBackend>(GetParam());
    if (!tb_->skip_reason().empty()) GTEST_SKIP() << tb_->skip_reason();
    be_ = tb_->get();
  }
  template <class T>
  T* upload(const std::vector<T>& h) {
    held_.push_back(be_->alloc(sizeof(T) * h.size()));
    be_->upload(held_.back(), h.data(), sizeof(T) * h.size());
    return static_cast<T*>(held_.back());
  }
  std::vector<float> download(const float* d, size_t n) {
    std::vector<float> h(n);
    be_->download(h.data(), d, sizeof(float) * n);
    return h;
  }
  void TearDown() override {
    for (void* p : held_) be_->release(p);
  }
  FdConfig config() const {
    FdConfig cfg;
    if (GetParam().kind != TargetKind::kReference && GetParam().kind != TargetKind::kCpu) cfg.max_elements = 32;
    return cfg;
  }

  std::unique_ptr<TargetBackend> tb_;
  Backend* be_ = nullptr;
  std::vector<void*> held_;
};

// The loss is smooth everywhere: dlogits against central differences of scale * (sum of losses).
TEST_P(NetGrad, SoftmaxCrossEntropyWithSmoothing) {
  const int n = 5, k = 7;
  std::vector<float> z = random_vec(n * k, 11, -3.f, 3.f);
  const std::vector<int32_t> y = {0, 6, 3, 3, 1};
  const float scale = 0.25f, eps = 0.1f;
  float* d_z = upload(z);
  const int32_t* d_y = upload(y);
  float* d_dz = upload(std::vector<float>(z.size(), 0.f));
  auto loss = [&] {
    double s = 0;
    int64_t c = 0;
    be_->softmax_xent(DType::kF32, n, k, d_z, d_y, eps, scale, nullptr, &s, &c);
    return s * scale;
  };
  double s = 0;
  int64_t c = 0;
  be_->softmax_xent(DType::kF32, n, k, d_z, d_y, eps, scale, d_dz, &s, &c);
  EXPECT_TRUE(fd_check(z, download(d_dz, z.size()), loss, "softmax-xent dlogits", config(),
                       [&](size_t i) { be_->upload(d_z + i, &z[i], sizeof(float)); }));
}

// Parameter gradients of the mean cross-entropy through Net::backward. Batch norm with gamma in [0.2, 0.4]
// and beta = +-2.5 keeps every ReLU input at least ~0.9 from its kink (the tests of
// tests/backend/layer_grad_test.cpp explain why), so the check can be tight.
TEST_P(NetGrad, WholeNetParameterGradients) {
  Net net(*be_, Dims{6, 7, 2}, 3);
  net.add(make_conv2d("conv1", 4, {3, 1, 1, false}));
  net.add(make_batchnorm("bn1"));
  net.add(make_relu("relu1"));
  net.add(make_avgpool("pool1", 2, 2));
  net.add(make_conv2d("conv2", 5, {3, 2, 1, true}));
  net.add(make_global_avgpool("gap"));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 3));
  const int n = 3;
  net.build(n, 5);
  std::vector<float> params = download(net.params(), net.num_params());
  for (const ParamInfo& p : net.param_table()) {
    if (p.name == "bn1.weight") {
      auto g = random_vec(p.size, 7, 0.2f, 0.4f);
      std::copy(g.begin(), g.end(), params.begin() + p.offset);
    }
    if (p.name == "bn1.bias")
      for (size_t j = 0; j < p.size; ++j) params[p.offset + j] = j % 2 ? -2.5f : 2.5f;
  }
  be_->upload(net.params(), params.data(), sizeof(float) * params.size());
  const float* d_x = upload(random_vec(6 * 7 * 2 * n, 31));
  const int32_t* d_y = upload(std::vector<int32_t>{0, 2, 1});
  float* d_dl = upload(std::vector<float>(n * 3, 0.f));
  auto loss = [&] {
    double s = 0;
    int64_t c = 0;
    const float* z = static_cast<const float*>(net.forward(d_x, n, true));  // an fp32 net
    be_->softmax_xent(DType::kF32, n, 3, z, d_y, 0.f, 1.f / n, nullptr, &s, &c);
    return s / n;
  };
  net.zero_grads();
  double s = 0;
  int64_t c = 0;
  be_->softmax_xent(DType::kF32, n, 3, static_cast<const float*>(net.forward(d_x, n, true)), d_y, 0.f, 1.f / n, d_dl,
                    &s, &c);
  std::vector<size_t> ready;
  net.backward(d_dl, n, [&](size_t off) { ready.push_back(off); });
  const std::vector<float> analytic = download(net.grads(), net.num_params());
  // Readiness offsets never increase and end at 0 (gradient buckets start from the end of the buffer).
  ASSERT_FALSE(ready.empty());
  for (size_t i = 1; i < ready.size(); ++i) EXPECT_LE(ready[i], ready[i - 1]);
  EXPECT_EQ(ready.back(), 0u);
  EXPECT_TRUE(fd_check(params, analytic, loss, "net parameter gradients", config(),
                       [&](size_t i) { be_->upload(net.params() + i, &params[i], sizeof(float)); }));
}

// A residual join with stochastic depth (src/model/join_layers.cpp) in a graph: samples whose branch is dropped
// and kept both, the gradients through the shortcut and the scaled branch into both convolutions.
TEST_P(NetGrad, StochasticDepthJoinGradients) {
  const int n = 6;
  const float p = 0.5f;
  Net net(*be_, Dims{5, 4, 2}, 3);
  net.add(make_conv2d("stem", 3, {3, 1, 1, true}));
  net.add(make_conv2d("branch", 3, {3, 1, 1, true}));
  net.add(make_stochastic_depth_add("join", p), {"stem", "branch"});
  net.add(make_global_avgpool("gap"));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 3));
  net.build(n, 9);
  const std::vector<int64_t> ids = {11, 5, 700, 3, 12, 64};
  const BatchContext ctx{21, 4, upload(ids)};
  int kept = 0;
  for (int64_t id : ids)
    kept += uniform01(mix64(hash_key(batch_draw_key(ctx, kStochasticDepthStream, "join"), id) ^ mix64(0))) >= p;
  ASSERT_GT(kept, 0);
  ASSERT_LT(kept, n);
  std::vector<float> params = download(net.params(), net.num_params());
  const float* d_x = upload(random_vec(5 * 4 * 2 * n, 41));
  const int32_t* d_y = upload(std::vector<int32_t>{0, 2, 1, 1, 0, 2});
  float* d_dl = upload(std::vector<float>(n * 3, 0.f));
  auto run = [&](float* dlogits) {
    double s = 0;
    int64_t c = 0;
    net.set_batch(ctx);
    const float* z = static_cast<const float*>(net.forward(d_x, n, true));  // an fp32 net
    be_->softmax_xent(DType::kF32, n, 3, z, d_y, 0.f, 1.f / n, dlogits, &s, &c);
    return s / n;
  };
  net.zero_grads();
  run(d_dl);
  net.backward(d_dl, n);
  EXPECT_TRUE(fd_check(params, download(net.grads(), net.num_params()), [&] { return run(nullptr); },
                       "stochastic depth net parameter gradients", config(),
                       [&](size_t i) { be_->upload(net.params() + i, &params[i], sizeof(float)); }));
}

INSTANTIATE_TEST_SUITE_P(Backends, NetGrad, ::testing::ValuesIn(targets()), target_param_name);

}  // namespace
}  // namespace cnn::test
