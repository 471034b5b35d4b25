// Stochastic depth (make_stochastic_depth_add; EfficientNet-B0's residual joins): whole samples of the branch are
// dropped or scaled by 1/(1-p), at the rate p, keyed by (seed, step, layer, global sample id) and not by the
// position in the batch; the gradient takes the forward's scales; evaluation is the plain add; efficientnet_b0
// carries torchvision's probabilities.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/model/zoo.h"
#include "tests/common/half_test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;

Backend& cpu() {
  static auto be = make_cpu_backend(1);
  return *be;
}

// The layer for up to max_n samples of shape d in type t.
std::unique_ptr<MultiInputLayer> make_layer(float p, const Dims& d, int max_n, DType t = DType::kF32) {
  auto l = make_stochastic_depth_add("features.2.1.add", p);
  l->set_dtype(t);
  EXPECT_EQ(l->setup_inputs({d, d}), d);
  l->allocate(cpu(), max_n);
  return l;
}

const Dims kD{2, 2, 3};
const size_t kPer = kD.size();

// The per-sample scale the forward applied to the branch: y = x + s * b, s from the first element (b != 0).
std::vector<float> scales(const std::vector<float>& x, const std::vector<float>& b, const std::vector<float>& y) {
  std::vector<float> s(x.size() / kPer);
  for (size_t i = 0; i < s.size(); ++i) s[i] = (y[i * kPer] - x[i * kPer]) / b[i * kPer];
  return s;
}

// Whether sample `id` keeps the branch, computed directly from kernels/rng.h as layers.h specifies it.
bool kept(const BatchContext& ctx, const std::string& layer, int64_t id, float p) {
  const uint64_t key = batch_draw_key(ctx, kStochasticDepthStream, layer);
  return uniform01(mix64(hash_key(key, static_cast<uint64_t>(id)) ^ mix64(0))) >= p;
}

TEST(StochasticDepth, DropsWholeSamplesAtRatePKeyedByGlobalId) {
  const int n = 4096;
  const float p = 0.25f, keep_scale = 1.f / (1.f - p);
  auto l = make_layer(p, kD, n);
  const std::vector<float> x = random_vec(kPer * n, 1), b = random_vec(kPer * n, 2, 0.5f, 1.5f);
  std::vector<int64_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 1000003LL * i % 999983;  // global ids, not positions
  std::vector<float> y(x.size());
  l->set_batch({3, 8, ids.data()});
  l->forward_inputs(cpu(), {x.data(), b.data()}, y.data(), n, true);
  // Each sample is the shortcut alone or shortcut + branch / (1 - p), in every element ("row" mode).
  const std::vector<float> s = scales(x, b, y);
  std::vector<float> want(y.size());
  int dropped = 0;
  for (int i = 0; i < n; ++i) {
    const float si = kept({3, 8}, "features.2.1.add", ids[i], p) ? keep_scale : 0.f;
    dropped += si == 0.f;
    for (size_t j = i * kPer; j < (i + 1) * kPer; ++j) want[j] = x[j] + b[j] * si;
  }
  // (The expected values may be computed with a fused multiply-add: one rounding apart.)
  EXPECT_TRUE(all_close(y, want, 1e-7, 1.2e-7, "y = x + b * keep / (1 - p) per sample"));
  // Binomial(4096, 0.25): 1024 +- 27.7; five standard deviations.
  EXPECT_NEAR(dropped, p * n, 5 * std::sqrt(n * p * (1 - p)));
  // A sample alone (as on another rank, or in another micro-batch) gets the scale it got in the batch.
  auto one = make_layer(p, kD, 1);
  for (int i : {0, 1, 777, n - 1}) {
    std::vector<float> y1(kPer);
    one->set_batch({3, 8, &ids[i]});
    one->forward_inputs(cpu(), {x.data() + i * kPer, b.data() + i * kPer}, y1.data(), 1, true);
    EXPECT_TRUE(all_close(y1, std::vector<float>(y.begin() + i * kPer, y.begin() + (i + 1) * kPer), 0, 0,
                          "sample " + std::to_string(i) + " alone"));
  }
  // Another step draws independently: both drop a sample at rate p^2.
  std::vector<float> y2(x.size());
  l->set_batch({3, 9, ids.data()});
  l->forward_inputs(cpu(), {x.data(), b.data()}, y2.data(), n, true);
  const std::vector<float> s2 = scales(x, b, y2);
  int both = 0;
  for (int i = 0; i < n; ++i) both += s[i] < 0.5f && s2[i] < 0.5f;
  EXPECT_NEAR(both, p * p * n, 5 * std::sqrt(n * p * p * (1 - p * p)));
  // So does another seed.
  l->set_batch({4, 8, ids.data()});
  l->forward_inputs(cpu(), {x.data(), b.data()}, y2.data(), n, true);
  EXPECT_NE(y, y2);
}

// Backward: the shortcut's gradient is dy, the branch's dy times the forward's per-sample scale.
TEST(StochasticDepth, GradientTakesTheForwardScales) {
  const int n = 64;
  const float p = 0.5f;
  auto l = make_layer(p, kD, n);
  const std::vector<float> x = random_vec(kPer * n, 3), b = random_vec(kPer * n, 4, 0.5f, 1.5f),
                           dy = random_vec(kPer * n, 5);
  std::vector<int64_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 7 * i + 1;
  std::vector<float> y(x.size()), dx(x.size(), NAN), db(x.size(), NAN);
  l->set_batch({11, 2, ids.data()});
  l->forward_inputs(cpu(), {x.data(), b.data()}, y.data(), n, true);
  l->backward_inputs(cpu(), {x.data(), b.data()}, y.data(), dy.data(), {dx.data(), db.data()}, n);
  const std::vector<float> s = scales(x, b, y);
  std::vector<float> want(x.size());
  int dropped = 0;
  for (int i = 0; i < n; ++i) {
    dropped += s[i] < 0.5f;
    for (size_t j = i * kPer; j < (i + 1) * kPer; ++j) want[j] = dy[j] * (s[i] < 0.5f ? 0.f : 1.f / (1.f - p));
  }
  ASSERT_GT(dropped, 0);
  ASSERT_LT(dropped, n);
  EXPECT_TRUE(all_close(dx, dy, 0, 0, "shortcut gradient"));
  EXPECT_TRUE(all_close(db, want, 0, 0, "branch gradient"));
  // Only the gradient that is asked for is written.
  std::vector<float> db2(x.size(), NAN);
  l->backward_inputs(cpu(), {x.data(), b.data()}, y.data(), dy.data(), {nullptr, db2.data()}, n);
  EXPECT_EQ(db2, db);
}

// Evaluation, and training with p = 0, are the plain add, forward and backward.
TEST(StochasticDepth, EvaluationAndZeroProbabilityAreThePlainAdd) {
  const int n = 16;
  const std::vector<float> x = random_vec(kPer * n, 6), b = random_vec(kPer * n, 7), dy = random_vec(kPer * n, 8);
  std::vector<float> sum(x.size());
  for (size_t j = 0; j < x.size(); ++j) sum[j] = x[j] + b[j];
  for (const auto& [p, train] : {std::pair{0.5f, false}, std::pair{0.f, true}}) {
    auto l = make_layer(p, kD, n);
    std::vector<float> y(x.size()), dx(x.size()), db(x.size());
    l->set_batch({1, 1, nullptr});
    l->forward_inputs(cpu(), {x.data(), b.data()}, y.data(), n, train);
    l->backward_inputs(cpu(), {x.data(), b.data()}, y.data(), dy.data(), {dx.data(), db.data()}, n);
    const std::string what = train ? " (p = 0)" : " (evaluation)";
    EXPECT_TRUE(all_close(y, sum, 0, 0, "y" + what));
    EXPECT_TRUE(all_close(dx, dy, 0, 0, "dx" + what));
    EXPECT_TRUE(all_close(db, dy, 0, 0, "db" + what));
  }
  EXPECT_THROW(make_stochastic_depth_add("a", 1.f), Error);
}

// In 16 bits, torchvision's rounding: the scale 1/(1-p) and branch * scale in the activation type, then the add.
TEST(StochasticDepth, SixteenBitRoundsLikeTorchvision) {
  const int n = 256;
  const float p = 0.1875f;  // the last block's
  for (DType t : test::kHalfTypes) {
    auto l = make_layer(p, kD, n, t);
    const auto x = test::to_bits(random_vec(kPer * n, 9), t);
    const auto b = test::to_bits(random_vec(kPer * n, 10, 0.5f, 1.5f), t);
    std::vector<uint16_t> y(x.size());
    l->set_batch({5, 3, nullptr});
    l->forward_inputs(cpu(), {x.data(), b.data()}, y.data(), n, true);
    const std::vector<float> xf = test::from_bits(x, t), bf = test::from_bits(b, t), yf = test::from_bits(y, t);
    const float scale = test::from_bits(test::to_bits({1.f / (1.f - p)}, t), t)[0];
    std::vector<float> kept(x.size());
    for (size_t j = 0; j < x.size(); ++j) kept[j] = bf[j] * scale;
    const std::vector<float> kept16 = test::from_bits(test::to_bits(kept, t), t);
    std::vector<float> want(x.size());
    int dropped = 0;
    for (int i = 0; i < n; ++i) {
      const bool drop = yf[i * kPer] == xf[i * kPer];
      dropped += drop;
      for (size_t j = i * kPer; j < (i + 1) * kPer; ++j) want[j] = xf[j] + (drop ? 0.f : kept16[j]);
    }
    EXPECT_GT(dropped, 0);
    EXPECT_LT(dropped, n / 2);
    EXPECT_TRUE(test::same_bits(y, test::to_bits(want, t), t, "y"));
  }
}

// torchvision's efficientnet_b0: block b of 16 drops with 0.2 * b / 16 where it has a residual join; evaluation
// does not depend on the probability, training does.
TEST(StochasticDepth, EfficientNetB0HasTorchvisionsProbabilities) {
  auto forward = [](float sd, bool train, std::vector<std::string>* joins) {
    Net net(cpu(), {32, 32, 3}, 10);
    ModelOptions mo;
    mo.stochastic_depth = sd;
    build_model("efficientnet_b0", net, mo);
    net.build(4, 7);
    if (joins)
      for (const auto& layer : net.layers()) {
        const std::string d = layer->describe(), tag = "add, stochastic depth ";
        if (d.compare(0, tag.size(), tag) == 0) joins->push_back(layer->name() + " " + d.substr(tag.size()));
      }
    const std::vector<int64_t> ids = {3, 1, 4, 15};
    net.set_batch({42, 0, ids.data()});
    const std::vector<float> x = random_vec(32 * 32 * 3 * 4, 12);
    const float* z = static_cast<const float*>(net.forward(x.data(), 4, train));
    return std::vector<float>(z, z + 40);
  };
  std::vector<std::string> joins, none;
  const std::vector<float> eval = forward(0.2f, false, &joins);
  // The blocks (0-based over all 16) whose input and output shapes agree: 2, 4, 6, 7, 9, 10, 12, 13, 14.
  EXPECT_EQ(joins, (std::vector<std::string>{"features.2.1.add p=0.025", "features.3.1.add p=0.05",
                                             "features.4.1.add p=0.075", "features.4.2.add p=0.0875",
                                             "features.5.1.add p=0.1125", "features.5.2.add p=0.125",
                                             "features.6.1.add p=0.15", "features.6.2.add p=0.1625",
                                             "features.6.3.add p=0.175"}));
  EXPECT_EQ(eval, forward(0.f, false, &none));
  EXPECT_TRUE(none.empty());
  EXPECT_NE(forward(0.9f, true, nullptr), forward(0.f, true, nullptr));
}

}  // namespace
}  // namespace cnn
