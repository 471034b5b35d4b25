// Augmentation: crop/flip/erase semantics, and identical global batches for 1 and 3 ranks.
#include <cstring>

#include "io/augment.h"
#include "kernels/image_prep.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// Samples whose pixels encode (id, position), held in memory.
class MemoryDataset : public Dataset {
 public:
  MemoryDataset(int64_t n, int h, int w, int c) {
    info_.count = n;
    info_.height = h;
    info_.width = w;
    info_.channels = c;
    info_.num_classes = 5;
    info_.mean.assign(c, 10.f);
    info_.std.assign(c, 20.f);
  }
  const DatasetInfo& info() const override { return info_; }
  const std::string& path() const override { return path_; }
  void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) override {
    const size_t sb = info_.sample_bytes();
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < sb; ++j) images[i * sb + j] = static_cast<uint8_t>(1 + (ids[i] * 31 + j * 7) % 250);
      labels[i] = label(ids[i]);
    }
  }
  int32_t label(int64_t id) const override { return static_cast<int32_t>(id % 5); }

 private:
  DatasetInfo info_;
  std::string path_ = "memory";
};

// One image through the loader's pixel work (draw_augment, then prepare_images_cpu), in 0..255 units.
std::vector<float> augment_one(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c,
                               const std::vector<uint8_t>& src) {
  const ImageAug g = draw_augment(a, epoch, id, h, w);
  const std::vector<float> mean(c, 0.f), std(c, 1.f);
  ImageBatch b;
  b.n = 1, b.h = h, b.w = w, b.c = c;
  b.pixels = src.data(), b.aug = &g, b.mean = mean.data(), b.std = std.data();
  std::vector<float> out(src.size());
  prepare_images_cpu(b, out.data());
  return out;
}

TEST(Augment, CropAndFipMoveWholePixels) {
  const int h = 5, w = 6, c = 2;
  std::vector<uint8_t> src(h * w * c);
  std::vector<float> dst;
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  AugmentConfig a;
  a.crop_pad = 2;
  a.flip = true;
  a.seed = 3;
  int flipped = 0, shifted = 0;
  for (int64_t id = 0; id < 64; ++id) {
    dst = augment_one(a, 0, id, h, w, c, src);
    // Find the offset/flip that explains the output: every non-zero pixel is a source pixel moved rigidly.
    bool found = false;
    for (int f = 0; f < 2 && !found; ++f)
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx) {
          bool ok = true;
          for (int y = 0; y < h && ok; ++y)
            for (int x = 0; x < w && ok; ++x) {
              const int sy = y + dy, sx = (f ? w - 1 - x : x) + dx;
              for (int k = 0; k < c; ++k) {
                const float want = sy < 0 || sy >= h || sx < 0 || sx >= w ? 0 : src[(sy * w + sx) * c + k];
                ok = ok && dst[(y * w + x) * c + k] == want;
              }
            }
          if (ok) {
            found = true;
            flipped += f;
            shifted += dy != 0 || dx != 0;
          }
        }
    ASSERT_TRUE(found) << "sample " << id << " is not a padded crop/flip of its image";
  }
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
  EXPECT_GT(shifted, 40);
  // Same key, same result; another epoch, another draw.
  EXPECT_EQ(augment_one(a, 0, 63, h, w, c, src), dst);
  bool differs = false;
  for (int e = 1; e < 6; ++e) differs = differs || augment_one(a, e, 63, h, w, c, src) != dst;
  EXPECT_TRUE(differs);
}

TEST(Augment, ErasingZeroesOneRectangle) {
  const int h = 10, w = 12, c = 3;
  AugmentConfig a;
  a.erase_p = 1.f;
  int erased = 0;
  for (int64_t id = 0; id < 20; ++id) {
    const std::vector<float> img = augment_one(a, 2, id, h, w, c, std::vector<uint8_t>(h * w * c, 1));
    int zeros = 0, y0 = h, y1 = -1, x0 = w, x1 = -1;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        if (img[(y * w + x) * c] == 0.f) {
          ++zeros;
          y0 = std::min(y0, y), y1 = std::max(y1, y), x0 = std::min(x0, x), x1 = std::max(x1, x);
          EXPECT_EQ(img[(y * w + x) * c + 2], 0.f);
        }
    if (zeros == 0) continue;
    ++erased;
    EXPECT_EQ(zeros, (y1 - y0 + 1) * (x1 - x0 + 1)) << "not a rectangle";
    EXPECT_GE(zeros, 1);
    EXPECT_LE(zeros, 0.4 * h * w);
  }
  EXPECT_GE(erased, 15);
  a.erase_p = 0.f;
  EXPECT_EQ(augment_one(a, 2, 1, h, w, c, std::vector<uint8_t>(h * w * c, 1)), std::vector<float>(h * w * c, 1.f));
}

// Global batch b as one rank sees it, or as the concatenation of `world` ranks' slices.
std::vector<Batch> batches(Dataset& ds, int world, const AugmentConfig& a, int64_t steps) {
  Sampler s(ds.info().count, 12, 7);
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int r = 0; r < world; ++r) loaders.push_back(std::make_unique<Loader>(ds, s, r, world, 2, 0, 0, steps, a));
  std::vector<Batch> out;
  for (int64_t i = 0; i < steps; ++i) {
    Batch whole;
    for (auto& l : loaders) {
      const Batch& b = l->next(nullptr);
      whole.epoch = b.epoch;
      whole.step = b.step;
      whole.n += b.n;
      whole.ids.insert(whole.ids.end(), b.ids.begin(), b.ids.end());
      whole.images.insert(whole.images.end(), b.images.begin(), b.images.end());
      whole.labels.insert(whole.labels.end(), b.labels.begin(), b.labels.end());
    }
    out.push_back(std::move(whole));
  }
  return out;
}

TEST(Augment, SameGlobalBatchesForOneAndThreeRanks) {
  // The loaders of all ranks of a world share one sampler from several threads (a real run has one per
  // rank); each world gets its own dataset and sampler.
  MemoryDataset a(50, 7, 9, 3), b(50, 7, 9, 3);
  AugmentConfig aug;
  aug.crop_pad = 3;
  aug.flip = true;
  aug.rotate = 15.f;
  aug.brightness = aug.contrast = aug.saturation = 0.4f;
  aug.erase_p = 0.5f;
  aug.seed = 11;
  const auto one = batches(a, 1, aug, 9);  // 4 steps per epoch: crosses two epoch boundaries
  const auto three = batches(b, 3, aug, 9);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].ids, three[i].ids) << "step " << i;
    EXPECT_EQ(one[i].labels, three[i].labels) << "step " << i;
    EXPECT_EQ(one[i].images, three[i].images) << "step " << i;
  }
  // Augmentation did change the images.
  MemoryDataset c(50, 7, 9, 3);
  const auto plain = batches(c, 1, AugmentConfig{}, 1);
  EXPECT_EQ(plain[0].ids, one[0].ids);
  EXPECT_NE(plain[0].images, one[0].images);
}

}  // namespace
}  // namespace cnn
