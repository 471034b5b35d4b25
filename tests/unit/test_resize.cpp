// Resize and crop to the network input (io/resize.h, io/resized_dataset.h): the crop boxes against a direct
// transcription of torchvision's RandomResizedCrop.get_params / Resize / CenterCrop, the antialiased
// interpolation against a direct 2-D sum of the triangle filter in double for small images, the keying of the
// draws by (seed, epoch, sample id), and the resized set through the loader's host and device outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "io/loader.h"
#include "io/resized_dataset.h"
#include "io/synthetic_dataset.h"
#include "kernels/image_prep.h"
#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/train/config.h"

namespace cnn {
namespace {

// Uniform draws from a fixed list, cycling.
struct Script {
  std::vector<double> u;
  size_t next = 0;
  double operator()() { return u[next++ % u.size()]; }
};

// torchvision 0.14 RandomResizedCrop.get_params followed by RandomHorizontalFlip, written out from its source.
ResizePlan torchvision_rrc(int height, int width, double s0, double s1, double r0, double r1, Script u,
                           bool* fallback) {
  ResizePlan p;
  *fallback = false;
  const double area = double(height) * width;
  for (int t = 0; t < 10; ++t) {
    const double target_area = area * (s0 + (s1 - s0) * u());
    const double aspect_ratio = std::exp(std::log(r0) + (std::log(r1) - std::log(r0)) * u());
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect_ratio)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect_ratio)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      p.y = static_cast<int>(std::floor(u() * (height - h + 1)));
      p.x = static_cast<int>(std::floor(u() * (width - w + 1)));
      p.h = h, p.w = w;
      p.flip = u() < 0.5;
      return p;
    }
  }
  *fallback = true;
  const double in_ratio = double(width) / height;
  if (in_ratio < r0) {
    p.w = width, p.h = static_cast<int>(std::nearbyint(p.w / r0));
  } else if (in_ratio > r1) {
    p.h = height, p.w = static_cast<int>(std::nearbyint(p.h * r1));
  } else {
    p.w = width, p.h = height;
  }
  p.y = (height - p.h) / 2, p.x = (width - p.w) / 2;
  p.flip = u() < 0.5;
  return p;
}

TEST(Resize, RandomResizedCropBoxIsTorchvisions) {
  ResizeOptions o;
  o.height = 7, o.width = 5, o.train = true;
  CounterRng rng(5, 6);
  int fallbacks = 0, flips = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int sh = 1 + static_cast<int>(rng.below(40)), sw = 1 + static_cast<int>(rng.below(40));
    o.min_scale = trial % 3 ? 0.08 : 0.5, o.max_scale = trial % 5 ? 1.0 : 0.6;
    o.min_ratio = trial % 2 ? 3.0 / 4 : 0.2, o.max_ratio = trial % 2 ? 4.0 / 3 : 5.0;
    Script s;
    for (int k = 0; k < 41; ++k) s.u.push_back(rng.uniform());
    bool fallback;
    const ResizePlan want = torchvision_rrc(sh, sw, o.min_scale, o.max_scale, o.min_ratio, o.max_ratio, s, &fallback);
    const ResizePlan got = random_resized_crop(o, sh, sw, s);
    ASSERT_EQ(std::vector<int>({got.y, got.x, got.h, got.w, got.flip}),
              std::vector<int>({want.y, want.x, want.h, want.w, want.flip}))
        << sh << "x" << sw << " trial " << trial;
    ASSERT_EQ(std::vector<int>({got.rh, got.rw, got.oy, got.ox}), std::vector<int>({7, 5, 0, 0}));
    ASSERT_TRUE(got.y >= 0 && got.x >= 0 && got.y + got.h <= sh && got.x + got.w <= sw);
    fallbacks += fallback;
    flips += got.flip;
  }
  EXPECT_GT(flips, 100);
  EXPECT_GT(fallbacks, 0);  // 1-pixel-wide images reach the central fallback
}

TEST(Resize, EvaluationIsResizeThenCenterCrop) {
  ResizeOptions o;
  o.height = o.width = 224;
  EXPECT_EQ(default_test_resize(224, 224), 256);
  EXPECT_EQ(default_test_resize(32, 32), 37);
  ResizePlan p = resize_center_crop(o, 375, 500);  // Resize(256): 256 x int(256 * 500 / 375) = 256 x 341
  EXPECT_EQ(std::vector<int>({p.y, p.x, p.h, p.w, p.rh, p.rw, p.oy, p.ox, p.flip}),
            std::vector<int>({0, 0, 375, 500, 256, 341, 16, 58, 0}));  // left: round(58.5) = 58, half to even
  o.height = o.width = 32;
  p = resize_center_crop(o, 28, 28);  // 37x37, offset round(2.5) = 2
  EXPECT_EQ(std::vector<int>({p.rh, p.rw, p.oy, p.ox}), std::vector<int>({37, 37, 2, 2}));
  // A set stored at the resize size is only center-cropped: Resize(10) of a 10x10 image changes no pixel.
  o.height = o.width = 6, o.test_resize = 10;
  std::vector<uint8_t> src(10 * 10 * 2), got(6 * 6 * 2), want;
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
  resize_antialiased(src.data(), 10, 10, 2, resize_center_crop(o, 10, 10), got.data(), 6, 6);
  for (int y = 2; y < 8; ++y) want.insert(want.end(), &src[(y * 10 + 2) * 2], &src[(y * 10 + 8) * 2]);
  EXPECT_EQ(got, want);
  o.height = o.width = 32, o.test_resize = 30;
  try {
    resize_center_crop(o, 28, 28);
    FAIL() << "a resize smaller than the crop was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("--data.test_resize 30"), std::string::npos) << e.what();
  }
}

// Weight of source pixel j for output i along one axis: the triangle filter of half-width max(s, 1) at the
// output centre s * (i + 0.5) in resized-box units, normalised over the box (the definition, in double).
std::vector<double> direct_weights(int in, int r, int i) {
  const double s = double(in) / r, support = std::max(s, 1.0), center = s * (i + 0.5);
  std::vector<double> w(in);
  double total = 0;
  for (int j = 0; j < in; ++j) total += w[j] = std::max(0.0, 1.0 - std::fabs(j + 0.5 - center) / support);
  for (double& v : w) v /= total;
  return w;
}

// The plan applied by the definition: a 2-D weighted sum in double per output pixel, rounded.
std::vector<uint8_t> direct_resize(const std::vector<uint8_t>& src, int sw, int c, const ResizePlan& p, int oh,
                                   int ow) {
  std::vector<uint8_t> out(static_cast<size_t>(oh) * ow * c);
  for (int i = 0; i < oh; ++i)
    for (int k = 0; k < ow; ++k) {
      const std::vector<double> wy = direct_weights(p.h, p.rh, p.oy + i),
                                wx = direct_weights(p.w, p.rw, p.ox + (p.flip ? ow - 1 - k : k));
      for (int ch = 0; ch < c; ++ch) {
        double acc = 0;
        for (int y = 0; y < p.h; ++y)
          for (int x = 0; x < p.w; ++x) acc += wy[y] * wx[x] * src[((p.y + y) * sw + p.x + x) * c + ch];
        out[(static_cast<size_t>(i) * ow + k) * c + ch] = static_cast<uint8_t>(std::nearbyint(acc));
      }
    }
  return out;
}

TEST(Resize, AntialiasedBilinearIsTheTriangleFilterAverage) {
  CounterRng rng(9, 1);
  struct Case {
    int sh, sw, c, oh, ow;
    ResizePlan p;
  };
  const std::vector<Case> cases = {
      {5, 7, 1, 5, 7, {0, 0, 5, 7, 5, 7, 0, 0, false}},     // identity
      {9, 13, 3, 4, 3, {0, 0, 9, 13, 4, 3, 0, 0, false}},   // downscale 2.25 x 4.33: antialiased
      {6, 5, 2, 11, 9, {0, 0, 6, 5, 11, 9, 0, 0, true}},    // upscale, mirrored
      {12, 10, 3, 5, 6, {3, 2, 7, 8, 5, 6, 0, 0, true}},    // a crop box: taps stay inside it
      {28, 28, 1, 32, 32, {0, 0, 28, 28, 37, 37, 2, 2, false}},  // eval: Resize(37) + CenterCrop(32)
      {10, 15, 3, 6, 6, {0, 0, 10, 15, 8, 12, 1, 3, false}},     // non-square resize, window
  };
  for (const Case& t : cases) {
    std::vector<uint8_t> src(static_cast<size_t>(t.sh) * t.sw * t.c), got(static_cast<size_t>(t.oh) * t.ow * t.c);
    for (auto& v : src) v = static_cast<uint8_t>(rng.next() >> 56);
    resize_antialiased(src.data(), t.sh, t.sw, t.c, t.p, got.data(), t.oh, t.ow);
    const std::vector<uint8_t> want = direct_resize(src, t.sw, t.c, t.p, t.oh, t.ow);
    // float against double: a sum within 1e-4 of a half rounds either way, so one level off is allowed.
    int off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_LE(std::abs(got[i] - want[i]), 1) << t.sh << "x" << t.sw << " -> " << t.oh << "x" << t.ow << " at " << i;
      off += got[i] != want[i];
    }
    EXPECT_LE(off, static_cast<int>(got.size()) / 50 + 1) << t.sh << "x" << t.sw << " -> " << t.oh << "x" << t.ow;
    if (t.sh == t.oh && t.sw == t.ow && t.p.rh == t.sh && t.p.rw == t.sw) {
      EXPECT_EQ(got, src);
    }
  }
}

TEST(Resize, DrawsAreKeyedBySeedEpochAndSample) {
  ResizeOptions o;
  o.height = o.width = 16, o.train = true, o.seed = 4;
  auto key = [&](uint64_t seed, int64_t epoch, int64_t id) {
    o.seed = seed;
    const ResizePlan p = plan_resize(o, epoch, id, 40, 30);
    return std::vector<int>({p.y, p.x, p.h, p.w, p.flip});
  };
  EXPECT_EQ(key(4, 2, 17), key(4, 2, 17));
  EXPECT_NE(key(4, 2, 17), key(4, 2, 18));
  EXPECT_NE(key(4, 2, 17), key(4, 3, 17));
  EXPECT_NE(key(4, 2, 17), key(5, 2, 17));
  o.train = false;  // evaluation: the same plan for every sample and epoch
  EXPECT_EQ(key(4, 2, 17), key(9, 0, 3));
}

// A resized set read in any grouping or on any number of threads gives each sample the same image (so any rank
// count sees the same global batch), and the loader's device output carries these resized pixels: run through the reference pixel
// work they are the host output bit for bit.
TEST(Resize, ResizedSetReadsAlikeInAnyGroupingAndOnBothLoaderOutputs) {
  SyntheticSpec spec;
  spec.count = 96, spec.height = 11, spec.width = 9, spec.channels = 3, spec.classes = 4;
  ResizeOptions o;
  o.height = 8, o.width = 12, o.train = true, o.seed = 21;
  // One reader per loader: each loader thread sets its reader's epoch.
  ResizedDataset ds(make_synthetic_dataset(spec, 3), o), ds2(make_synthetic_dataset(spec, 3), o);
  ASSERT_EQ(ds.info().height, 8);
  ASSERT_EQ(ds.info().width, 12);
  const size_t sb = ds.info().sample_bytes();
  ds.set_epoch(1);
  const std::vector<int64_t> ids = {5, 40, 7, 93, 0, 61};
  std::vector<uint8_t> all(ids.size() * sb), one(sb);
  std::vector<int32_t> labels(ids.size());
  ds.read(ids.data(), ids.size(), all.data(), labels.data());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t l;
    ds.read(&ids[i], 1, one.data(), &l);
    ASSERT_EQ(std::memcmp(one.data(), all.data() + i * sb, sb), 0) << "sample " << ids[i];
  }
  ResizedDataset threaded(make_synthetic_dataset(spec, 3), o, 4);  // 4 threads over 6 samples
  threaded.set_epoch(1);
  std::vector<uint8_t> shared(all.size());
  threaded.read(ids.data(), ids.size(), shared.data(), labels.data());
  EXPECT_EQ(shared, all) << "resizing on 4 threads changed the images";
  ds.set_epoch(2);
  ds.read(ids.data(), 1, one.data(), labels.data());
  EXPECT_NE(std::memcmp(one.data(), all.data(), sb), 0) << "the epoch does not change the crop";

  AugmentConfig aug;
  aug.rotate = 10.f, aug.seed = 17;
  Sampler sampler(spec.count, 16, 23);
  Loader host(ds, sampler, 1, 2, 2, 0, 0, 8, aug, LoaderOutput::kHost);
  Loader device(ds2, sampler, 1, 2, 2, 0, 0, 8, aug, LoaderOutput::kDevice);
  for (int step = 0; step < 8; ++step) {  // 6 steps per epoch: crosses into epoch 1
    const Batch& a = host.next(nullptr);
    const Batch& b = device.next(nullptr);
    ASSERT_EQ(b.pixels.size(), static_cast<size_t>(b.n) * sb);
    ImageBatch ib;
    ib.n = b.n, ib.h = 8, ib.w = 12, ib.c = 3, ib.pixels = b.pixels.data(), ib.aug = b.aug.data();
    ib.mean = ds.info().mean.data(), ib.std = ds.info().std.data();
    std::vector<float> x(a.images.size());
    prepare_images_cpu(ib, x.data());
    ASSERT_EQ(std::memcmp(x.data(), a.images.data(), x.size() * sizeof(float)), 0) << "step " << step;
  }
}

TEST(Resize, RangeOptionsTakeNumbersAndFractions) {
  EXPECT_EQ(parse_range("augment.rrc_ratio", "3/4,4/3"), (std::array<double, 2>{0.75, 4.0 / 3}));
  EXPECT_EQ(parse_range("augment.rrc_scale", "0.08,1"), (std::array<double, 2>{0.08, 1.0}));
  EXPECT_EQ(parse_range("augment.rrc_ratio", "0.5,2"), (std::array<double, 2>{0.5, 2.0}));
  for (const char* bad : {"0.5,0.2", "0,1", "0.1,1.5", "1", "0.1,0.2,0.3", "a/b,1", "1/0,2", ""}) {
    try {
      parse_range("augment.rrc_scale", bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitUsage);
      EXPECT_NE(std::string(e.what()).find("augment.rrc_scale"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cnn
