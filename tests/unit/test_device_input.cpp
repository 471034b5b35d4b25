// The loader's two outputs agree: float images prepared on the loader thread (the CPU backend's path) equal
// the uint8 pixels plus augmentation draws of the device path run through the reference pixel work
// (kernels/image_prep.h), bit for bit, with crop, flip, rotation, colour jitter and erasing on; the draws are
// keyed by (seed, epoch, sample id) in both. The trainer's input path picks one by the backend's capability.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/loader.h"
#include "io/synthetic_dataset.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/image_prep.h"
#include "src/train/input_path.h"

namespace cnn {
namespace {

TEST(DeviceInput, LoaderOutputsAgreeBitForBit) {
  SyntheticSpec spec;
  spec.count = 200, spec.height = 9, spec.width = 8, spec.channels = 3, spec.classes = 4;
  auto ds = make_synthetic_dataset(spec, 3);
  AugmentConfig aug;
  aug.crop_pad = 2, aug.flip = true, aug.rotate = 20.f, aug.erase_p = 0.5f, aug.seed = 17;
  aug.brightness = aug.contrast = aug.saturation = 0.4f;
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

// The network input a backend's InputPath makes of the first augmented batch: through the loader's float
// images or through upload_images, as BackendCaps::device_image_prep says.
std::vector<float> first_input(Backend& be, Dataset& ds, const SyntheticSpec& spec) {
  AugmentConfig aug;
  aug.crop_pad = 2, aug.flip = true, aug.rotate = 20.f, aug.erase_p = 0.5f, aug.seed = 17;
  aug.brightness = aug.contrast = aug.saturation = 0.4f;
  const size_t n = 16, pixels = n * spec.height * spec.width * spec.channels;
  StepBuffers buf;
  buf.x = static_cast<float*>(be.alloc(sizeof(float) * pixels));
  buf.labels = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * n));
  buf.ids = static_cast<int64_t*>(be.alloc(sizeof(int64_t) * n));
  InputPath in(be, buf, ds.info());
  Sampler sampler(spec.count, n, 23);
  Loader loader(ds, sampler, 0, 1, 2, 0, 0, 1, aug, in.loader_output());
  in.upload(loader.next(nullptr));
  std::vector<float> x(pixels);
  be.download(x.data(), buf.x, sizeof(float) * pixels);
  for (void* p : {static_cast<void*>(buf.x), static_cast<void*>(buf.labels), static_cast<void*>(buf.ids)})
    be.release(p);
  return x;
}

TEST(DeviceInput, InputPathFollowsTheBackendCapability) {
  SyntheticSpec spec;
  spec.count = 64, spec.height = 9, spec.width = 8, spec.channels = 3, spec.classes = 4;
  auto ds = make_synthetic_dataset(spec, 3);
  const auto cpu = make_cpu_backend(1, CpuKernels::kReference);
  const auto emu = make_emu_backend();
  ASSERT_FALSE(cpu->caps().device_image_prep);
  ASSERT_TRUE(emu->caps().device_image_prep);
  const std::vector<float> host = first_input(*cpu, *ds, spec), device = first_input(*emu, *ds, spec);
  ASSERT_EQ(host.size(), device.size());
  size_t nonzero = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_NEAR(host[i], device[i], 1e-5f * (1 + std::fabs(host[i]))) << "element " << i;
    nonzero += host[i] != 0.f;
  }
  EXPECT_GT(nonzero, host.size() / 2);  // a real batch arrived, not two zero buffers
}

}  // namespace
}  // namespace cnn
