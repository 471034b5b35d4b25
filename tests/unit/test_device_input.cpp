// The loader's two outputs agree: float images prepared on the loader thread (the CPU backend's path) equal
// the uint8 pixels plus augmentation draws of the device path run through the reference pixel work
// (kernels/image_prep.h), bit for bit, with crop, flip and erasing on; the draws are keyed by (seed, epoch,
// sample id) in both.
#include <gtest/gtest.h>

#include <cstring>

#include "io/loader.h"
#include "io/synthetic_dataset.h"
#include "kernels/image_prep.h"

namespace cnn {
namespace {

TEST(DeviceInput, LoaderOutputsAgreeBitForBit) {
  SyntheticSpec spec;
  spec.count = 200, spec.height = 9, spec.width = 8, spec.channels = 3, spec.classes = 4;
  auto ds = make_synthetic_dataset(spec, 3);
  AugmentConfig aug;
  aug.crop_pad = 2, aug.flip = true, aug.erase_p = 0.5f, aug.seed = 17;
  Sampler sampler(spec.count, 16, 23);
  Loader host(*ds, sampler, 1, 2, 2, 0, 0, 20, aug, LoaderOutput::kHost);
  Loader device(*ds, sampler, 1, 2, 2, 0, 0, 20, aug, LoaderOutput::kDevice);
  int erased = 0, flipped = 0;
  for (int step = 0; step < 20; ++step) {  // 12 steps per epoch: crosses into epoch 1
    const Batch& a = host.next(nullptr);
    const Batch& b = device.next(nullptr);
    ASSERT_EQ(a.ids, b.ids);
    ASSERT_EQ(a.labels, b.labels);
    ASSERT_TRUE(b.images.empty());
    ASSERT_EQ(b.aug.size(), static_cast<size_t>(b.n));
    ImageBatch ib;
    ib.n = b.n, ib.h = spec.height, ib.w = spec.width, ib.c = spec.channels;
    ib.pixels = b.pixels.data(), ib.aug = b.aug.data(), ib.mean = ds->info().mean.data(),
    ib.std = ds->info().std.data(), ib.labels = b.labels.data();
    std::vector<float> x(a.images.size());
    prepare_images_cpu(ib, x.data());
    ASSERT_EQ(std::memcmp(x.data(), a.images.data(), x.size() * sizeof(float)), 0) << "step " << step;
    for (const ImageAug& g : b.aug) erased += g.erase_h > 0, flipped += g.flip;
  }
  EXPECT_GT(erased, 20);  // the draws were exercised
  EXPECT_GT(flipped, 20);
}

}  // namespace
}  // namespace cnn
