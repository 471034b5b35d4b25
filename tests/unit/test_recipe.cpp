// The training recipe: AdamW against a hand computation, the schedules, weight decay on or off for biases and
// batch-norm parameters, gradient accumulation (K micro-batches of B/K = one step of B) and clipping.
#include <cmath>

#include "kernels/optimizer.h"
#include "src/model/zoo.h"
#include "src/train/schedule.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(AdamW, TwoStepsByHand) {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, decoupled decay 0.01; gradients 0.5 then -0.25.
  // Step 1: m = 0.05, v = 0.00025, m/bc1 = 0.5, sqrt(v/bc2) = 0.5 -> w = 1 - 0.1 (0.01 + 1) = 0.899.
  // Step 2: m = 0.02, v = 0.00031225, bc1 = 0.19, bc2 = 0.001999 -> w = 0.8714673.
  std::vector<float> w = {1.0f}, m = {0.f}, v = {0.f};
  const float g1 = 0.5f, g2 = -0.25f;
  adamw_update_cpu(1, w.data(), &g1, m.data(), v.data(), 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f);
  EXPECT_FLOAT_EQ(m[0], 0.05f);
  EXPECT_NEAR(v[0], 0.00025f, 1e-8);  // 1 - 0.999 is inexact in float
  EXPECT_NEAR(w[0], 0.899f, 1e-6);
  adamw_update_cpu(1, w.data(), &g2, m.data(), v.data(), 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.19f,
                   static_cast<float>(1.0 - 0.999 * 0.999));
  EXPECT_FLOAT_EQ(m[0], 0.02f);
  EXPECT_NEAR(v[0], 0.00031225f, 1e-8);
  EXPECT_NEAR(w[0], 0.8714673f, 2e-6);
}

TEST(Schedule, StepAndMultistepWithWarmup) {
  LrSchedule s;
  s.peak = 1.0;
  s.gamma = 0.1;
  s.warmup_steps = 2;
  s.total_steps = 100;
  s.kind = "multistep";
  s.milestones = {10, 20};
  EXPECT_DOUBLE_EQ(s.at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.at(1), 1.0);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_NEAR(s.at(10), 0.1, 1e-12);
  EXPECT_NEAR(s.at(19), 0.1, 1e-12);
  EXPECT_NEAR(s.at(20), 0.01, 1e-12);
  EXPECT_NEAR(s.at(99), 0.01, 1e-12);
  s.kind = "step";
  s.step_size = 30;
  EXPECT_DOUBLE_EQ(s.at(29), 1.0);
  EXPECT_NEAR(s.at(30), 0.1, 1e-12);
  EXPECT_NEAR(s.at(65), 0.01, 1e-12);
}

// A net without batch norm (micro-batches would see other statistics) and one with it.
std::unique_ptr<Net> small_net(Backend& be, int max_n, bool bn) {
  auto net = std::make_unique<Net>(be, Dims{8, 8, 2}, 3);
  net->add(make_conv2d("conv1", 4, {3, 1, 1, !bn}));
  if (bn) net->add(make_batchnorm("bn1"));
  net->add(make_relu("relu1"));
  net->add(make_maxpool("pool1", 2, 2));
  net->add(make_flatten("flat"));
  net->add(make_linear("fc", 3));
  net->build(max_n, 9);
  return net;
}

// Runs `steps` optimizer steps of batch n in `accum` micro-batches; returns the parameters.
std::vector<float> train(int n, int accum, int steps, const OptimizerConfig& oc, double clip = 0,
                         bool bn = false) {
  auto be = make_cpu_backend(1);
  auto net = small_net(*be, n / accum, bn);
  auto opt = make_optimizer(oc, *be, *net);
  StepBuffers buf = alloc_step_buffers(*be, *net, n);
  StepConfig sc;
  sc.global_batch = n;
  sc.accum_steps = accum;
  sc.clip_norm = clip;
  StepStats st;
  for (int s = 0; s < steps; ++s) {
    auto x = test::random_vec(8 * 8 * 2 * n, 100 + s);
    std::vector<int32_t> y(n);
    for (int i = 0; i < n; ++i) y[i] = (i * 7 + s) % 3;
    be->upload(buf.x, x.data(), x.size() * sizeof(float));
    be->upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    sc.step = s;
    train_step(*be, *net, *opt, nullptr, buf, n, sc, 0.05, st);
  }
  free_step_buffers(*be, buf);
  return std::vector<float>(net->params(), net->params() + net->num_params());
}

TEST(GradAccumulation, KMicroBatchesEqualOneBatch) {
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.weight_decay = 1e-3;
  const auto one = train(12, 1, 3, oc);
  EXPECT_TRUE(test::all_close(train(12, 3, 3, oc), one, 1e-6, 1e-5, "accum 3 vs 1"));
  EXPECT_TRUE(test::all_close(train(12, 4, 3, oc), one, 1e-6, 1e-5, "accum 4 vs 1"));
  oc.kind = "adamw";
  EXPECT_TRUE(test::all_close(train(12, 2, 3, oc), train(12, 1, 3, oc), 1e-6, 1e-5, "adamw accum 2 vs 1"));
}

TEST(GradClipping, UpdateNormIsTheClipNorm) {
  // Plain SGD with lr 0.05: the first update is -0.05 * clipped gradient, so its norm is 0.05 * clip.
  OptimizerConfig oc;
  oc.momentum = 0;
  const auto init = train(6, 1, 0, oc);
  const auto clipped = train(6, 1, 1, oc, 1e-3);
  double s = 0;
  for (size_t i = 0; i < init.size(); ++i) s += std::pow(clipped[i] - init[i], 2);
  EXPECT_NEAR(std::sqrt(s), 0.05 * 1e-3, 1e-8);
  // A large limit leaves the step alone.
  EXPECT_TRUE(test::all_close(train(6, 1, 2, oc, 1e6), train(6, 1, 2, oc), 0, 0, "no clipping below the limit"));
}

TEST(WeightDecay, BiasAndBatchNormOnlyWhenAsked) {
  auto be = make_cpu_backend(1);
  auto net = small_net(*be, 2, true);
  for (bool all : {false, true}) {
    std::vector<float> before(net->params(), net->params() + net->num_params());
    net->zero_grads();
    OptimizerConfig oc;
    oc.momentum = 0;
    oc.weight_decay = 0.5;
    oc.decay_bn_bias = all;
    make_optimizer(oc, *be, *net)->step(0.1);  // zero gradient: only decay moves anything
    for (const ParamInfo& p : net->param_table()) {
      const bool decayed = p.decay || all;
      for (size_t i = p.offset; i < p.offset + p.size; ++i)
        ASSERT_FLOAT_EQ(net->params()[i], before[i] * (decayed ? 0.95f : 1.f)) << p.name << " decay_bn_bias " << all;
    }
    EXPECT_FALSE(net->param_table()[1].decay) << net->param_table()[1].name;  // bn1.weight
  }
}

}  // namespace
}  // namespace cnn
