// JPEG/PNG codec and the resize/crop transforms.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/image_codec.h"
#include "src/base/error.h"

namespace cnn {
namespace {

std::vector<uint8_t> ramp(int h, int w, int c) {
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) img[(y * w + x) * c + k] = static_cast<uint8_t>(x * 5 + y * 3 + k * 20);
  return img;
}

TEST(ImageCodec, PngRoundTripIsExactForGrayAndRgb) {
  for (int c : {1, 3}) {
    auto img = ramp(9, 13, c);
    std::string png = encode_png(img.data(), 9, 13, c);
    EXPECT_EQ(sniff_image_format(reinterpret_cast<const uint8_t*>(png.data()), png.size()), ImageFormat::kPng);
    Image out;
    ASSERT_EQ(decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), 0, &out), "");
    EXPECT_EQ(out.height, 9);
    EXPECT_EQ(out.width, 13);
    EXPECT_EQ(out.channels, c);
    EXPECT_EQ(out.pixels, img);
  }
}

TEST(ImageCodec, JpegDecodesCloseAndConvertsChannels) {
  auto img = ramp(16, 24, 3);
  std::string jpg = encode_jpeg(img.data(), 16, 24, 3, 95);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(jpg.data());
  int h, w, c;
  ASSERT_EQ(probe_image(p, jpg.size(), &h, &w, &c), "");
  EXPECT_EQ(h, 16);
  EXPECT_EQ(w, 24);
  EXPECT_EQ(c, 3);
  Image out;
  ASSERT_EQ(decode_image(p, jpg.size(), 0, &out), "");
  ASSERT_EQ(out.pixels.size(), img.size());
  double err = 0;
  for (size_t i = 0; i < img.size(); ++i) err += std::abs(int(out.pixels[i]) - int(img[i]));
  EXPECT_LT(err / img.size(), 3.0);
  Image gray;
  ASSERT_EQ(decode_image(p, jpg.size(), 1, &gray), "");
  EXPECT_EQ(gray.channels, 1);
  EXPECT_EQ(gray.pixels.size(), 16u * 24u);
}

TEST(ImageCodec, CmykJpegDecodesToRgb) {
  // CMYK files carry the Adobe marker (libjpeg writes it), so the stored values count as inverted ink and a
  // flat colour with K = 255 (no black) must come back as R,G,B = C,M,Y.
  const int h = 8, w = 8;
  std::vector<uint8_t> cmyk(h * w * 4);
  for (int i = 0; i < h * w; ++i) cmyk[4 * i] = 200, cmyk[4 * i + 1] = 100, cmyk[4 * i + 2] = 50, cmyk[4 * i + 3] = 255;
  std::string jpg = encode_jpeg(cmyk.data(), h, w, 4, 98);
  Image out;
  ASSERT_EQ(decode_image(reinterpret_cast<const uint8_t*>(jpg.data()), jpg.size(), 0, &out), "");
  ASSERT_EQ(out.channels, 3);
  EXPECT_NEAR(out.pixels[0], 200, 3);
  EXPECT_NEAR(out.pixels[1], 100, 3);
  EXPECT_NEAR(out.pixels[2], 50, 3);
  Image gray;
  ASSERT_EQ(decode_image(reinterpret_cast<const uint8_t*>(jpg.data()), jpg.size(), 1, &gray), "");
  EXPECT_NEAR(gray.pixels[0], (299 * 200 + 587 * 100 + 114 * 50) / 1000, 3);
}

TEST(ImageCodec, CorruptInputsGiveMessages) {
  auto img = ramp(16, 16, 3);
  std::string jpg = encode_jpeg(img.data(), 16, 16, 3);
  Image out;
  std::string cut = jpg.substr(0, jpg.size() - 12);
  EXPECT_NE(decode_image(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), 0, &out).find("ends early"),
            std::string::npos);
  std::string head = jpg.substr(0, 40);
  EXPECT_NE(decode_image(reinterpret_cast<const uint8_t*>(head.data()), head.size(), 0, &out).find("bad JPEG"),
            std::string::npos);
  std::string png = encode_png(img.data(), 16, 16, 3);
  png.resize(png.size() / 2);
  EXPECT_NE(decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), 0, &out).find("bad PNG"),
            std::string::npos);
  const std::string gif = "GIF89a....";
  EXPECT_NE(decode_image(reinterpret_cast<const uint8_t*>(gif.data()), gif.size(), 0, &out).find("not a JPEG or PNG"),
            std::string::npos);
  // A header promising more pixels than allowed is refused before allocating.
  std::string big = encode_png(img.data(), 16, 16, 3);
  EXPECT_NE(decode_image(reinterpret_cast<const uint8_t*>(big.data()), big.size(), 0, &out, 100).find("limit"),
            std::string::npos);
}

TEST(ImageCodec, ResampleIdentityFlipAndDownscale) {
  auto img = ramp(6, 8, 3);
  std::vector<uint8_t> out(img.size());
  CropRect all{0, 0, 6, 8};
  resample_bilinear(img.data(), 6, 8, 3, all, false, out.data(), 6, 8);
  EXPECT_EQ(out, img);
  resample_bilinear(img.data(), 6, 8, 3, all, true, out.data(), 6, 8);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 8; ++x)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(out[(y * 8 + x) * 3 + k], img[(y * 8 + 7 - x) * 3 + k]);
  // 2x downscale of a linear ramp samples between pixel pairs: the average of neighbours.
  std::vector<uint8_t> half(3 * 4 * 3);
  resample_bilinear(img.data(), 6, 8, 3, all, false, half.data(), 3, 4);
  EXPECT_EQ(half[0], (img[0] + img[3] + img[24] + img[27] + 2) / 4);
}

TEST(ImageCodec, CropPlansStayInsideAndAreDeterministic) {
  ImageTransform t;
  t.height = t.width = 32;
  t.mode = ResizeMode::kCenterCrop;
  CropRect r;
  bool flip;
  plan_crop(t, 100, 200, 0, 0, &r, &flip);
  EXPECT_FLOAT_EQ(r.h, 87.5f);
  EXPECT_FLOAT_EQ(r.w, 87.5f);
  EXPECT_FLOAT_EQ(r.y + r.h / 2, 50.0f);
  EXPECT_FLOAT_EQ(r.x + r.w / 2, 100.0f);
  EXPECT_FALSE(flip);

  t.mode = ResizeMode::kRandomResizedCrop;
  t.seed = 3;
  int flips = 0;
  for (int64_t id = 0; id < 500; ++id) {
    plan_crop(t, 120, 90, 2, id, &r, &flip);
    EXPECT_GE(r.y, 0);
    EXPECT_GE(r.x, 0);
    EXPECT_LE(r.y + r.h, 120);
    EXPECT_LE(r.x + r.w, 90);
    EXPECT_GE(r.h * r.w, 0.07f * 120 * 90);
    flips += flip;
    CropRect again;
    bool flip2;
    plan_crop(t, 120, 90, 2, id, &again, &flip2);
    EXPECT_EQ(r.x, again.x);
    EXPECT_EQ(r.h, again.h);
    EXPECT_EQ(flip, flip2);
  }
  EXPECT_GT(flips, 200);
  EXPECT_LT(flips, 300);
  EXPECT_EQ(parse_resize_mode("center-crop"), ResizeMode::kCenterCrop);
  EXPECT_THROW(parse_resize_mode("zoom"), Error);
}

}  // namespace
}  // namespace cnn
