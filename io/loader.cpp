#include "io/loader.h"

#include <chrono>

#include "kernels/image_prep.h"
#include "kernels/mix_images.h"
#include "src/base/error.h"

namespace cnn {

void normalize_images(const uint8_t* src, size_t pixels, int channels, const std::vector<float>& mean,
                      const std::vector<float>& std, float* dst) {
  float scale[16], shift[16];
  std::vector<float> big_scale, big_shift;
  float* sc = scale;
  float* sh = shift;
  if (channels > 16) {
    big_scale.resize(channels);
    big_shift.resize(channels);
    sc = big_scale.data();
    sh = big_shift.data();
  }
  for (int c = 0; c < channels; ++c) {
    sc[c] = 1.0f / std[c];
    sh[c] = -mean[c] / std[c];
  }
  for (size_t p = 0; p < pixels; ++p)
    for (int c = 0; c < channels; ++c) dst[p * channels + c] = src[p * channels + c] * sc[c] + sh[c];
}

Loader::Loader(Dataset& ds, Sampler& sampler, int rank, int world, int prefetch, int64_t first_epoch,
               int64_t first_step, int64_t total_steps, const AugmentConfig& aug, LoaderOutput output)
    : ds_(ds), sampler_(sampler), rank_(rank), world_(world), depth_(prefetch < 1 ? 1 : prefetch),
      epoch0_(first_epoch), step0_(first_step), total_(total_steps), aug_(aug), output_(output) {
  const int channels = ds.info().channels;
  if ((aug.contrast > 0.f || aug.saturation > 0.f) && channels != 1 && channels != 3)
    raise(kExitUsage,
          "--augment.color_jitter: contrast and saturation need images of 1 or 3 channels, and %s has %d "
          "(jitter brightness alone: B,0,0)",
          ds.path().c_str(), channels);
  for (size_t i = 0; i < depth_ + 1; ++i) free_.push_back(std::make_unique<Batch>());
  thread_ = std::thread(&Loader::run, this);
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Loader::produce(Batch& b, int64_t epoch, int64_t step) {
  const DatasetInfo& info = ds_.info();
  b.epoch = epoch;
  b.step = step;
  b.ids = sampler_.rank_slice(epoch, step, rank_, world_);
  b.n = static_cast<int>(b.ids.size());
  const size_t sb = info.sample_bytes();
  b.labels.resize(b.n);
  ds_.set_epoch(epoch);
  std::vector<uint8_t>& pixels = output_ == LoaderOutput::kDevice ? b.pixels : raw_;
  pixels.resize(b.n * sb);
  ds_.read(b.ids.data(), b.ids.size(), pixels.data(), b.labels.data());
  b.aug.clear();
  if (aug_.any())
    for (int i = 0; i < b.n; ++i) b.aug.push_back(draw_augment(aug_, epoch, b.ids[i], info.height, info.width));
  b.mix.clear();
  if (aug_.mix.on()) b.mix = draw_mix_batch(aug_.mix, epoch, b.ids, b.labels, info.height, info.width);
  if (output_ == LoaderOutput::kDevice) return;
  b.images.resize(b.n * sb);
  if (b.aug.empty()) {
    normalize_images(pixels.data(), static_cast<size_t>(b.n) * info.height * info.width, info.channels, info.mean,
                     info.std, b.images.data());
  } else {
    ImageBatch ib;  // the device path's pixel work, here on the loader thread
    ib.n = b.n, ib.h = info.height, ib.w = info.width, ib.c = info.channels;
    ib.pixels = pixels.data(), ib.aug = b.aug.data(), ib.mean = info.mean.data(), ib.std = info.std.data();
    prepare_images_cpu(ib, b.images.data());
  }
  if (!b.mix.empty()) mix_images_cpu(b.n, info.height, info.width, info.channels, b.mix.data(), b.images.data());
}

void Loader::run() {
  int64_t epoch = epoch0_, step = step0_;
  const int64_t spe = sampler_.steps_per_epoch();
  for (int64_t i = 0; i < total_; ++i) {
    std::unique_ptr<Batch> b;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      b = std::move(free_.front());
      free_.pop_front();
    }
    try {
      produce(*b, epoch, step);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_.push_back(std::move(b));
    }
    cv_.notify_all();
    if (++step == spe) {
      step = 0;
      ++epoch;
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  done_ = true;
  cv_.notify_all();
}

const Batch& Loader::next(double* wait_s) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  if (current_) free_.push_back(std::move(current_));
  cv_.notify_all();
  cv_.wait(lk, [&] { return !ready_.empty() || error_ || done_; });
  if (ready_.empty()) {
    if (error_) std::rethrow_exception(error_);
    raise(kExitFailure, "the loader was asked for more batches than it was set up to produce");
  }
  current_ = std::move(ready_.front());
  ready_.pop_front();
  if (wait_s) *wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return *current_;
}

}  // namespace cnn
