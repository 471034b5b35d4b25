#include "src/train/input_path.h"

namespace cnn {

InputPath::InputPath(Backend& be, const StepBuffers& buf, const DatasetInfo& norm)
    : be_(be), buf_(buf), norm_(norm), device_(be.caps().device_image_prep) {}

void InputPath::upload(const Batch& b) {
  // The loss reads the mixing draws on both paths; on a device they mix the images first.
  if (!b.mix.empty()) be_.upload(buf_.mix, b.mix.data(), sizeof(MixDraw) * b.n);
  if (!device_) {
    be_.upload(buf_.x, b.images.data(), sizeof(float) * b.images.size());
    be_.upload(buf_.labels, b.labels.data(), sizeof(int32_t) * b.n);
    be_.upload(buf_.ids, b.ids.data(), sizeof(int64_t) * b.n);
    return;
  }
  ImageBatch ib;
  ib.n = b.n;
  ib.h = norm_.height;
  ib.w = norm_.width;
  ib.c = norm_.channels;
  ib.pixels = b.pixels.data();
  ib.aug = b.aug.empty() ? nullptr : b.aug.data();
  ib.mean = norm_.mean.data();
  ib.std = norm_.std.data();
  ib.labels = b.labels.data();
  ib.ids = b.ids.data();
  be_.upload_images(ib, buf_.x, buf_.labels, buf_.ids);
  if (!b.mix.empty()) be_.mix_images(b.n, ib.h, ib.w, ib.c, buf_.mix, buf_.x);
}

void InputPath::upload_eval(const uint8_t* pixels, const int32_t* labels, int n, const DatasetInfo& shape) {
  if (!device_) {
    img_.resize(static_cast<size_t>(n) * shape.sample_bytes());
    normalize_images(pixels, static_cast<size_t>(n) * shape.height * shape.width, shape.channels, norm_.mean,
                     norm_.std, img_.data());
    be_.upload(buf_.x, img_.data(), sizeof(float) * img_.size());
    be_.upload(buf_.labels, labels, sizeof(int32_t) * n);
    return;
  }
  ImageBatch ib;
  ib.n = n;
  ib.h = shape.height;
  ib.w = shape.width;
  ib.c = shape.channels;
  ib.pixels = pixels;
  ib.mean = norm_.mean.data();
  ib.std = norm_.std.data();
  ib.labels = labels;
  be_.upload_images(ib, buf_.x, buf_.labels, nullptr);
}

}  // namespace cnn
