// The prefetching loader: a background thread reads this rank's slice of upcoming global batches, converts
// uint8 NHWC to normalised float and queues them (depth `prefetch`) while the trainer computes. Errors in the
// thread (bad file, bad sample) are rethrown by next() in the trainer's thread. Training batches can be
// augmented (io/augment.h) and mixed (io/mix.h) on the same thread, so augmentation overlaps the step too.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "io/augment.h"
#include "io/dataset.h"
#include "io/sampler.h"

namespace cnn {

struct Batch {
  int64_t epoch = 0, step = 0;  // position in the global batch sequence
  int n = 0;
  std::vector<int64_t> ids;     // global sample ids (augmentation and dropout keys, tracing)
  std::vector<float> images;    // n * H * W * C, NHWC, augmented, (x - mean) / std (host-prepared batches)
  std::vector<int32_t> labels;  // n
  std::vector<ImageAug> aug;    // n, or empty without augmentation: each sample's draws
  // Device-prepared batches (LoaderOutput::kDevice): the dataset's uint8 pixels; Backend::upload_images does
  // the pixel work with `aug`. `images` stays empty.
  std::vector<uint8_t> pixels;
  // n mixup/cutmix draws (io/mix.h), or empty without mixing: `images` are mixed already; device-prepared
  // batches are mixed by Backend::mix_images after upload_images. The loss reads them too.
  std::vector<MixDraw> mix;
};

// Where a batch's pixel work happens: on the loader thread (float images, the CPU backend's path) or on the
// device after the upload of the uint8 bytes (4x fewer bytes to copy; the GPU does the conversion).
enum class LoaderOutput { kHost, kDevice };

// Converts uint8 NHWC pixels to float with per-channel (x - mean) / std.
void normalize_images(const uint8_t* src, size_t pixels, int channels, const std::vector<float>& mean,
                      const std::vector<float>& std, float* dst);

class Loader {
 public:
  // Produces batches (epoch, step) from `first_epoch`/`first_step` on, in order, for rank `rank` of `world`,
  // stopping after `total_steps` batches, augmented as `aug` says (nothing by default).
  Loader(Dataset& ds, Sampler& sampler, int rank, int world, int prefetch, int64_t first_epoch,
         int64_t first_step, int64_t total_steps, const AugmentConfig& aug = {},
         LoaderOutput output = LoaderOutput::kHost);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch; blocks until it is ready. *wait_s receives the seconds spent waiting. The batch stays
  // valid until the following call to next().
  const Batch& next(double* wait_s);

 private:
  void run();
  void produce(Batch& b, int64_t epoch, int64_t step);

  Dataset& ds_;
  Sampler& sampler_;
  int rank_, world_;
  size_t depth_;
  int64_t epoch0_, step0_, total_;
  AugmentConfig aug_;
  LoaderOutput output_;
  std::vector<uint8_t> raw_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> ready_, free_;
  std::unique_ptr<Batch> current_;
  std::exception_ptr error_;
  bool stop_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace cnn
