// Options of the layer set / recipe: values reach Config, bad ones are usage errors (exit 2).
#include "src/train/config.h"
#include "src/train/recipe.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

Config parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"cnntrain", "--data.train", "x.h5"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  Config c;
  parse_config(static_cast<int>(argv.size()), argv.data(), c);
  return c;
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& needle) {
  test::expect_throws([&] { parse(args); }, kExitUsage, needle);
}

TEST(ConfigRecipe, Values) {
  Config c = parse({"--model", "resnet56", "--train.optimizer", "adamw", "--train.schedule", "multistep",
                    "--train.milestones", "80,120", "--train.gamma", "0.2", "--train.accum_steps", "4",
                    "--train.clip_norm", "5", "--train.decay_bn_bias", "true", "--bn.momentum", "0.01",
                    "--augment.crop_pad", "4", "--augment.flip", "true", "--augment.erase_p", "0.5"});
  EXPECT_EQ(c.model, "resnet56");
  EXPECT_EQ(c.train.optimizer, "adamw");
  EXPECT_EQ(parse_milestones(c.train.milestones), (std::vector<double>{80, 120}));
  EXPECT_DOUBLE_EQ(c.train.gamma, 0.2);
  EXPECT_EQ(c.train.accum_steps, 4);
  EXPECT_DOUBLE_EQ(c.train.clip_norm, 5);
  EXPECT_TRUE(c.train.decay_bn_bias);
  EXPECT_DOUBLE_EQ(c.bn.momentum, 0.01);
  EXPECT_EQ(c.augment.crop_pad, 4);
  EXPECT_TRUE(c.augment.flip);
  EXPECT_DOUBLE_EQ(c.augment.erase_p, 0.5);
  EXPECT_NE(config_to_ini(c).find("[augment]\ncrop_pad = 4"), std::string::npos) << config_to_ini(c);
}

TEST(ConfigRecipe, RotationAndColourJitter) {
  Config c = parse({"--augment.rotate", "15", "--augment.color_jitter", "0.4,0,0.25"});
  const AugmentConfig a = make_augment_config(c);
  EXPECT_FLOAT_EQ(a.rotate, 15.f);
  EXPECT_FLOAT_EQ(a.brightness, 0.4f);
  EXPECT_FLOAT_EQ(a.contrast, 0.f);
  EXPECT_FLOAT_EQ(a.saturation, 0.25f);
  EXPECT_TRUE(a.any());
  const std::string ini = config_to_ini(c);
  EXPECT_NE(ini.find("rotate = 15\ncolor_jitter = 0.4,0,0.25\n"), std::string::npos) << ini;
  EXPECT_FALSE(make_augment_config(parse({})).any());
}

TEST(ConfigRecipe, EpochOptionsBecomeSteps) {
  Config c = parse({"--train.schedule", "multistep", "--train.milestones", "2,3.5", "--train.warmup_epochs", "0.5",
                    "--train.step_epochs", "1.5", "--train.lr", "0.4"});
  LrSchedule s = make_lr_schedule(c, 10, 100);
  EXPECT_EQ(s.milestones, (std::vector<int64_t>{20, 35}));
  EXPECT_EQ(s.warmup_steps, 5);
  EXPECT_EQ(s.step_size, 15);
  EXPECT_DOUBLE_EQ(s.at(4), 0.4);
  EXPECT_NEAR(s.at(35), 0.004, 1e-12);
}

TEST(ConfigRecipe, Errors) {
  expect_usage_error({"--model", "resnet9"}, "--model");
  expect_usage_error({"--train.schedule", "exponential"}, "--train.schedule");
  expect_usage_error({"--train.schedule", "multistep"}, "--train.milestones");
  expect_usage_error({"--train.milestones", "120,80"}, "must increase");
  expect_usage_error({"--train.milestones", "80,abc"}, "--train.milestones");
  expect_usage_error({"--train.lr", "-1"}, "--train.lr");
  expect_usage_error({"--train.optimizer", "lamb"}, "--train.optimizer");
  expect_usage_error({"--train.gamma", "0"}, "--train.gamma");
  expect_usage_error({"--train.accum_steps", "0"}, "--train.accum_steps");
  expect_usage_error({"--train.batch", "10", "--train.accum_steps", "4"}, "--train.accum_steps");
  expect_usage_error({"--train.clip_norm", "-1"}, "--train.clip_norm");
  expect_usage_error({"--bn.eps", "0"}, "--bn.eps");
  expect_usage_error({"--augment.erase_p", "1.5"}, "--augment.erase_p");
  expect_usage_error({"--augment.crop_pad", "-2"}, "--augment.crop_pad");
  expect_usage_error({"--augment.rotate", "200"}, "--augment.rotate");
  expect_usage_error({"--augment.color_jitter", "0.4,0.4"}, "three numbers");
  expect_usage_error({"--augment.color_jitter", "0.4,0.4,0.4,0.1"}, "three numbers");
  expect_usage_error({"--augment.color_jitter", "0.4,-1,0"}, "--augment.color_jitter");
}

}  // namespace
}  // namespace cnn
