// LossScaler: GradScaler's semantics (65536 to start, x0.5 and a skip on inf/NaN, x2 after N finite steps in a
// row), the guard against a vanishing scale, and exact continuation from a saved state.
#include <gtest/gtest.h>

#include <cfloat>
#include <vector>

#include "src/base/error.h"
#include "src/train/loss_scaler.h"

namespace cnn {
namespace {

LossScalerConfig fp16(int64_t interval = 2000) {
  LossScalerConfig c;
  c.enabled = true;
  c.growth_interval = interval;
  return c;
}

TEST(LossScaler, DisabledIsScaleOneAndNeverSkips) {
  LossScaler s(LossScalerConfig{});
  EXPECT_EQ(s.scale(), 1.f);
  EXPECT_FALSE(s.update(true));
  for (int i = 0; i < 5000; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1.f);
  EXPECT_EQ(s.state().skipped_steps, 0);
}

TEST(LossScaler, NonFiniteStepIsSkippedAndHalvesTheScale) {
  LossScaler s(fp16());
  EXPECT_EQ(s.scale(), 65536.f);
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.state().growth_tracker, 7);
  EXPECT_TRUE(s.update(true));  // step K = 8
  EXPECT_EQ(s.scale(), 32768.f);
  EXPECT_EQ(s.state().growth_tracker, 0);
  EXPECT_EQ(s.state().skipped_steps, 1);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 16384.f);
  EXPECT_EQ(s.state().skipped_steps, 2);
}

TEST(LossScaler, GrowsAfterExactlyIntervalFiniteSteps) {
  LossScaler s(fp16(2000));
  for (int i = 0; i < 1999; ++i) ASSERT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 65536.f);
  EXPECT_FALSE(s.update(false));  // the 2000th
  EXPECT_EQ(s.scale(), 131072.f);
  EXPECT_EQ(s.state().growth_tracker, 0);
  // A skip in between restarts the count.
  for (int i = 0; i < 1500; ++i) s.update(false);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 65536.f);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.f);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.f);
}

TEST(LossScaler, GrowthStopsBeforeOverflowingFp32) {
  LossScalerConfig c = fp16(1);
  c.init_scale = FLT_MAX / 1.5f;
  LossScaler s(c);
  s.update(false);  // x2 would be inf: kept
  EXPECT_EQ(s.scale(), FLT_MAX / 1.5f);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(LossScaler, AScaleThatVanishesStopsTheRun) {
  LossScaler s(fp16());
  int skips = 0;
  try {
    for (; skips < 100; ++skips) s.update(true);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitFailure);
    EXPECT_NE(std::string(e.what()).find("--precision bf16"), std::string::npos) << e.what();
  }
  // 65536 = 2^16 halves to 2^-14 in 30 steps and below it at the 31st.
  EXPECT_EQ(skips, 30);
}

TEST(LossScaler, RestoredStateContinuesExactly) {
  // An irregular pattern of overflows; a copy restored from the state after step 23 must agree afterwards.
  std::vector<bool> inf(200);
  for (size_t i = 0; i < inf.size(); ++i) inf[i] = (i * 7919) % 31 == 3;
  LossScaler a(fp16(5)), b(fp16(5));
  for (int i = 0; i < 23; ++i) a.update(inf[i]);
  b.restore(a.state());
  for (size_t i = 23; i < inf.size(); ++i) {
    ASSERT_EQ(a.update(inf[i]), b.update(inf[i]));
    ASSERT_EQ(a.scale(), b.scale());
    ASSERT_EQ(a.state().growth_tracker, b.state().growth_tracker);
    ASSERT_EQ(a.state().skipped_steps, b.state().skipped_steps);
  }
}

}  // namespace
}  // namespace cnn
