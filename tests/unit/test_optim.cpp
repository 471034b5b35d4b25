// Optimizer update and learning-rate schedule against hand computations.
#include <cmath>

#include "kernels/optimizer.h"
#include "src/train/schedule.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(Sgd, MomentumWeightDecayByHand) {
  std::vector<float> w = {1.0f, -2.0f}, g = {0.5f, 0.25f}, v = {0.1f, 0.0f};
  sgd_update_cpu(2, w.data(), g.data(), v.data(), 0.1f, 0.9f, 0.01f, false);
  // g' = g + wd*w = {0.51, 0.23}; v = 0.9 v + g' = {0.6, 0.23}; w -= 0.1 v
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.23f);
  EXPECT_FLOAT_EQ(w[0], 0.94f);
  EXPECT_FLOAT_EQ(w[1], -2.023f);
  std::vector<float> w2 = {1.0f}, g2 = {0.5f}, v2 = {0.1f};
  sgd_update_cpu(1, w2.data(), g2.data(), v2.data(), 0.1f, 0.9f, 0.0f, true);
  // nesterov: v = 0.59; w -= 0.1 (0.5 + 0.9*0.59)
  EXPECT_FLOAT_EQ(w2[0], 1.0f - 0.1f * (0.5f + 0.9f * 0.59f));
}

TEST(Schedule, WarmupThenCosine) {
  LrSchedule s;
  s.peak = 0.4;
  s.min_lr = 0.0;
  s.warmup_steps = 4;
  s.total_steps = 14;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(3), 0.4);
  EXPECT_DOUBLE_EQ(s.at(4), 0.4);
  EXPECT_NEAR(s.at(9), 0.2, 1e-12);  // halfway through the decay
  EXPECT_NEAR(s.at(14), 0.0, 1e-12);
  s.kind = "constant";
  EXPECT_DOUBLE_EQ(s.at(10), 0.4);
}

}  // namespace
}  // namespace cnn
