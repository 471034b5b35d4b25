// Rotation and colour jitter (kernels/image_prep.h, io/augment.h): angle 0 and factors 1 change no bit, a
// quarter turn of a square image moves whole pixels, the draws stay in their ranges and keep to their streams,
// and the loader refuses contrast/saturation on images that have no grey level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/augment.h"
#include "io/loader.h"
#include "io/synthetic_dataset.h"
#include "kernels/image_prep.h"
#include "src/base/error.h"

namespace cnn {
namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return v;
}

// n images of h x w x c through prepare_images_cpu with one ImageAug for all (null: none).
std::vector<float> prepare(const std::vector<uint8_t>& px, int n, int h, int w, int c, const ImageAug* aug) {
  const std::vector<float> mean(c, 100.f), std(c, 30.f);
  const std::vector<ImageAug> augs(n, aug ? *aug : ImageAug{});
  ImageBatch b;
  b.n = n, b.h = h, b.w = w, b.c = c;
  b.pixels = px.data(), b.aug = aug ? augs.data() : nullptr, b.mean = mean.data(), b.std = std.data();
  std::vector<float> x(px.size());
  prepare_images_cpu(b, x.data());
  return x;
}

TEST(RotateJitter, ZeroAngleAndUnitFactorsAreExactNoOps) {
  const int n = 3, h = 7, w = 5, c = 3;
  const auto px = pattern(static_cast<size_t>(n) * h * w * c);
  std::vector<float> plain(px.size());
  normalize_images(px.data(), static_cast<size_t>(n) * h * w, c, std::vector<float>(c, 100.f),
                   std::vector<float>(c, 30.f), plain.data());
  ImageAug a;  // what draw_augment makes of an angle of 0 and factors of 1
  a.rot_cos = static_cast<float>(std::cos(0.0)), a.rot_sin = static_cast<float>(std::sin(0.0));
  a.brightness = a.contrast = a.saturation = 1.f;
  const auto got = prepare(px, n, h, w, c, &a);
  EXPECT_EQ(std::memcmp(got.data(), plain.data(), sizeof(float) * plain.size()), 0);
  // Jitter strengths of 0 draw factors of exactly 1; a rotation of 0 degrees is off.
  AugmentConfig cfg;
  cfg.seed = 5;
  cfg.crop_pad = 1;  // some augmentation, so that draws are made at all
  for (int64_t id = 0; id < 20; ++id) {
    const ImageAug g = draw_augment(cfg, 0, id, h, w);
    EXPECT_EQ(g.rot_cos, 1.f);
    EXPECT_EQ(g.rot_sin, 0.f);
    EXPECT_EQ(g.brightness, 1.f);
    EXPECT_EQ(g.contrast, 1.f);
    EXPECT_EQ(g.saturation, 1.f);
  }
}

TEST(RotateJitter, QuarterTurnOfASquareImageMovesWholePixels) {
  const int s = 6, c = 3;
  const auto px = pattern(static_cast<size_t>(s) * s * c);
  ImageAug a;
  a.rot_cos = static_cast<float>(std::cos(M_PI / 2)), a.rot_sin = static_cast<float>(std::sin(M_PI / 2));
  const auto plain = prepare(px, 1, s, s, c, nullptr), turned = prepare(px, 1, s, s, c, &a);
  // Counter-clockwise: output (y, x) is input (x, s-1-y); the right column becomes the top row.
  for (int y = 0; y < s; ++y)
    for (int x = 0; x < s; ++x)
      for (int ch = 0; ch < c; ++ch)
        ASSERT_NEAR(turned[(y * s + x) * c + ch], plain[(x * s + (s - 1 - y)) * c + ch], 1e-4)
            << "y " << y << " x " << x << " channel " << ch;
}

TEST(RotateJitter, DrawsStayInTheirRangesAndStreams) {
  AugmentConfig cfg;
  cfg.seed = 9;
  cfg.rotate = 15.f;
  cfg.brightness = 0.4f, cfg.contrast = 1.5f, cfg.saturation = 0.2f;
  double most = 0, least_contrast = 1;
  int negative = 0;
  for (int64_t id = 0; id < 400; ++id) {
    const ImageAug g = draw_augment(cfg, 3, id, 8, 8);
    const double deg = std::atan2(g.rot_sin, g.rot_cos) * 180 / M_PI;
    EXPECT_LE(std::fabs(deg), 15.0 + 1e-4);
    EXPECT_NEAR(g.rot_cos * g.rot_cos + g.rot_sin * g.rot_sin, 1.0, 1e-6);
    most = std::max(most, std::fabs(deg));
    negative += deg < 0;
    EXPECT_GE(g.brightness, 0.6f);
    EXPECT_LE(g.brightness, 1.4f);
    EXPECT_GE(g.contrast, 0.f);  // max(0, 1 - 1.5)
    EXPECT_LE(g.contrast, 2.5f);
    least_contrast = std::min(least_contrast, static_cast<double>(g.contrast));
    EXPECT_GE(g.saturation, 0.8f);
    EXPECT_LE(g.saturation, 1.2f);
    // Turning the other augmentations off leaves the rotation and the factors as they were.
    AugmentConfig alone;
    alone.seed = cfg.seed, alone.rotate = cfg.rotate;
    EXPECT_EQ(draw_augment(alone, 3, id, 8, 8).rot_sin, g.rot_sin);
    alone.rotate = 0.f, alone.saturation = cfg.saturation;
    EXPECT_EQ(draw_augment(alone, 3, id, 8, 8).saturation, g.saturation);
  }
  EXPECT_GT(most, 14.0);  // the whole range is used, both ways
  EXPECT_GT(negative, 150);
  EXPECT_LT(negative, 250);
  EXPECT_LT(least_contrast, 0.05);
}

TEST(RotateJitter, LoaderRefusesContrastWithoutGreyLevels) {
  SyntheticSpec spec;
  spec.count = 8, spec.height = 4, spec.width = 4, spec.channels = 2, spec.classes = 2;
  auto ds = make_synthetic_dataset(spec, 1);
  Sampler sampler(spec.count, 4, 1);
  AugmentConfig aug;
  aug.saturation = 0.3f;
  try {
    Loader l(*ds, sampler, 0, 1, 1, 0, 0, 1, aug);
    FAIL() << "a 2-channel set with saturation jitter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--augment.color_jitter"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), kExitUsage);
  }
  aug.saturation = 0.f, aug.brightness = 0.3f;  // brightness has no grey level to take
  Loader l(*ds, sampler, 0, 1, 1, 0, 0, 1, aug);
  EXPECT_EQ(l.next(nullptr).n, 4);
}

}  // namespace
}  // namespace cnn
