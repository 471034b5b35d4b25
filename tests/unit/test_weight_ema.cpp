// The weights' moving average (src/train/weight_ema.h) against a direct computation in double, on the CPU
// backend, the emulated CUDA backend and a GPU where there is one; and the evaluation's top-k count
// (kernels/loss.h) on crafted logits with ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/loss.h"
#include "src/model/layers.h"
#include "src/train/step.h"
#include "src/train/weight_ema.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

std::vector<float> download(Backend& be, const float* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

// ema = d*ema + (1-d)*w in double, with the decay of update t.
void ema_by_hand(std::vector<double>& ema, const std::vector<float>& w, double d) {
  for (size_t i = 0; i < ema.size(); ++i) ema[i] = d * ema[i] + (1 - d) * w[i];
}

class WeightEmaTest : public ::testing::TestWithParam<BackendTarget> {};

TEST_P(WeightEmaTest, FollowsDirectComputationWithAndWithoutWarmup) {
  TargetBackend dev(GetParam());
  if (!dev.skip_reason().empty()) GTEST_SKIP() << dev.skip_reason();
  Backend& be = *dev.get();
  constexpr size_t kN = 1000 + 37, kB = 53;  // ragged tails
  for (bool warmup : {false, true}) {
    const EmaConfig c{0.9, warmup};
    std::vector<float> w = random_vec(kN, 5), b = random_vec(kB, 6);
    float* d_w = static_cast<float*>(be.alloc(sizeof(float) * kN));
    float* d_b = static_cast<float*>(be.alloc(sizeof(float) * kB));
    be.upload(d_w, w.data(), sizeof(float) * kN);
    be.upload(d_b, b.data(), sizeof(float) * kB);
    WeightEma ema(be, c, d_w, kN, d_b, kB);
    std::vector<double> ref(w.begin(), w.end()), ref_b(b.begin(), b.end());
    for (int t = 0; t < 6; ++t) {
      w = random_vec(kN, 100 + t);
      b = random_vec(kB, 200 + t);
      be.upload(d_w, w.data(), sizeof(float) * kN);
      be.upload(d_b, b.data(), sizeof(float) * kB);
      ema.update(d_w, d_b);
      const double d = warmup ? std::min(0.9, (1.0 + t) / (10.0 + t)) : 0.9;
      ema_by_hand(ref, w, d);
      ema_by_hand(ref_b, b, d);
    }
    EXPECT_EQ(ema.updates(), 6);
    EXPECT_TRUE(all_close(download(be, ema.data(), kN), ref, 1e-6, 1e-5, warmup ? "ema, warm-up" : "ema"));
    EXPECT_TRUE(all_close(download(be, ema.buffers(), kB), ref_b, 1e-6, 1e-5, "ema of the buffers"));
    // Warm-up decays 1/10, 2/11, ... : far from 0.9, so the two runs differ (the test tells them apart).
    EXPECT_NEAR(WeightEma::decay_at(c, 0), warmup ? 0.1 : 0.9, 1e-12);
    // Swapping twice restores both, bit for bit.
    const std::vector<float> before_w = download(be, d_w, kN), before_ema = download(be, ema.data(), kN);
    const std::vector<float> before_b = download(be, d_b, kB), before_ema_b = download(be, ema.buffers(), kB);
    ema.swap_with(d_w, d_b);
    EXPECT_EQ(download(be, d_w, kN), before_ema);
    EXPECT_EQ(download(be, d_b, kB), before_ema_b);
    ema.swap_with(d_w, d_b);
    EXPECT_EQ(download(be, d_w, kN), before_w);
    EXPECT_EQ(download(be, ema.data(), kN), before_ema);
    EXPECT_EQ(download(be, d_b, kB), before_b);
    EXPECT_EQ(download(be, ema.buffers(), kB), before_ema_b);
    be.release(d_w);
    be.release(d_b);
  }
}

// Through train_step: the average follows the weights and buffers of every applied update and stands still on a
// step the loss scaler skips (steps 2 and 5 see a NaN input, so their gradient is not finite), which leaves the
// batch-norm running statistics untouched too.
TEST_P(WeightEmaTest, TrainStepFoldsOnlyAppliedUpdates) {
  TargetBackend dev(GetParam());
  if (!dev.skip_reason().empty()) GTEST_SKIP() << dev.skip_reason();
  Backend& be = *dev.get();
  constexpr int kBatch = 6, kClasses = 7;
  Net net(be, Dims{5, 4, 2}, kClasses);
  net.add(make_conv2d("conv1", 4, {3, 1, 1, true}));
  net.add(make_batchnorm("bn1", {}, true));  // buffers, averaged beside the weights
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", kClasses));
  net.build(kBatch, 3);
  OptimizerConfig oc;
  auto opt = make_optimizer(oc, be, net);
  StepBuffers buf = alloc_step_buffers(be, net);
  LossScalerConfig lc;
  lc.enabled = true;
  lc.init_scale = 1.f;
  LossScaler scaler(lc);
  const Net& cnet = net;
  WeightEma ema(be, EmaConfig{0.8, false}, cnet.params(), net.num_params(), net.buffers(), net.num_buffers());
  ASSERT_EQ(ema.num_buffers(), 8u);  // running mean and variance of 4 channels
  std::vector<double> ref, ref_b;
  for (float v : download(be, cnet.params(), net.num_params())) ref.push_back(v);
  for (float v : download(be, net.buffers(), net.num_buffers())) ref_b.push_back(v);
  StepConfig sc;
  sc.global_batch = kBatch;
  sc.scaler = &scaler;
  sc.ema = &ema;
  int64_t skipped = 0, applied = 0;
  for (int s = 0; s < 8; ++s) {
    std::vector<float> x = random_vec(static_cast<size_t>(kBatch) * 5 * 4 * 2, 40 + s);
    if (s == 2 || s == 5) x[17] = std::numeric_limits<float>::quiet_NaN();
    std::vector<int32_t> y(kBatch);
    for (int i = 0; i < kBatch; ++i) y[i] = (i + s) % kClasses;
    be.upload(buf.x, x.data(), x.size() * sizeof(float));
    be.upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    StepStats st;
    const std::vector<float> stats_before = download(be, net.buffers(), net.num_buffers());
    train_step(be, net, *opt, nullptr, buf, kBatch, sc, 0.1, st);
    skipped += st.skipped;
    // A skipped step leaves the running statistics as they were (its forward saw the NaN).
    if (st.skipped) {
      EXPECT_EQ(download(be, net.buffers(), net.num_buffers()), stats_before) << "step " << s;
    }
    if (!st.skipped) {
      ++applied;
      ema_by_hand(ref, download(be, cnet.params(), net.num_params()), 0.8);
      ema_by_hand(ref_b, download(be, net.buffers(), net.num_buffers()), 0.8);
    }
  }
  EXPECT_EQ(skipped, 2);
  EXPECT_EQ(ema.updates(), applied);
  EXPECT_TRUE(all_close(download(be, ema.data(), net.num_params()), ref, 1e-6, 1e-5, "ema after train_step"));
  EXPECT_TRUE(all_close(download(be, ema.buffers(), net.num_buffers()), ref_b, 1e-6, 1e-5, "buffers' ema"));
  free_step_buffers(be, buf);
}

INSTANTIATE_TEST_SUITE_P(Targets, WeightEmaTest,
                         ::testing::Values(BackendTarget{"cpu", TargetKind::kCpu, 1, 0},
                                           BackendTarget{"emu", TargetKind::kEmu, 1, 0},
                                           BackendTarget{"cuda", TargetKind::kGpu}),
                         target_param_name);

// Top-k counted by hand: row i's label is listed with the number of classes strictly above it.
TEST(TopkHits, CraftedLogitsWithTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int kClasses = 7;
  const std::vector<float> z = {
      0, 1, 2, 3, 4, 5, 6,         // label 6: the maximum (0 above)
      0, 1, 2, 3, 4, 5, 6,         // label 2: 4 above -> a top-5 hit, not a top-4 one
      0, 1, 2, 3, 4, 5, 6,         // label 1: 5 above -> a miss for k = 5
      5, 5, 5, 5, 5, 5, 5,         // label 3: all tied, none strictly above -> a hit for every k
      1, 9, 9, 9, 9, 9, 0,         // label 0: 5 above -> miss; tied with nothing
      9, 9, 9, 9, 9, 9, 1,         // label 6: 6 above -> miss
      2, 2, 2, 2, 2, 2, 1,         // label 5: ties with 5 others, none above -> hit even for k = 1
      1, nan, 3, 4, 5, 6, 7,       // label 0: NaN elsewhere is never larger; 5 above -> miss
      1, 2, nan, 4, 5, 6, 7,       // label 2: a NaN label logit is a miss
  };
  const std::vector<int32_t> y = {6, 2, 1, 3, 0, 6, 5, 0, 2};
  const int n = static_cast<int>(y.size());
  EXPECT_EQ(topk_hits_cpu(n, kClasses, 5, z.data(), y.data()), 4);  // rows 0, 1, 3, 6
  EXPECT_EQ(topk_hits_cpu(n, kClasses, 4, z.data(), y.data()), 3);  // rows 0, 3, 6
  EXPECT_EQ(topk_hits_cpu(n, kClasses, 1, z.data(), y.data()), 3);  // rows 0, 3, 6
  EXPECT_EQ(topk_hits_cpu(n, kClasses, 6, z.data(), y.data()), 7);  // + rows 2, 4, 7
  EXPECT_EQ(topk_hits_cpu(n, kClasses, 7, z.data(), y.data()), 8);  // all but the NaN label
}

// Random logits against a sort-based count (distinct values: no ties to decide).
TEST(TopkHits, MatchesSortOnRandomLogits) {
  constexpr int kN = 200, kClasses = 13;
  const std::vector<float> z = random_vec(static_cast<size_t>(kN) * kClasses, 77);
  std::vector<int32_t> y(kN);
  for (int i = 0; i < kN; ++i) y[i] = (i * 7 + 3) % kClasses;
  for (int k : {1, 3, 5, 12}) {
    int64_t want = 0;
    for (int i = 0; i < kN; ++i) {
      std::vector<float> row(z.begin() + i * kClasses, z.begin() + (i + 1) * kClasses);
      std::sort(row.rbegin(), row.rend());
      want += z[i * kClasses + y[i]] >= row[k - 1];
    }
    EXPECT_EQ(topk_hits_cpu(kN, kClasses, k, z.data(), y.data()), want) << "k = " << k;
  }
}

}  // namespace
}  // namespace cnn::test
