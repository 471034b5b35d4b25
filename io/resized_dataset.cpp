#include "io/resized_dataset.h"

#include <vector>

namespace cnn {

ResizedDataset::ResizedDataset(std::unique_ptr<Dataset> stored, const ResizeOptions& o)
    : stored_(std::move(stored)), opt_(o), info_(stored_->info()) {
  info_.height = o.height;
  info_.width = o.width;
  const DatasetInfo& s = stored_->info();
  if (!o.train) resize_center_crop(o, s.height, s.width);  // refuses a test_resize too small, before training
}

void ResizedDataset::read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) {
  const DatasetInfo& s = stored_->info();
  std::vector<uint8_t> raw(k * s.sample_bytes());
  stored_->read(ids, k, raw.data(), labels);
  const int64_t epoch = epoch_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < k; ++i)
    resize_antialiased(raw.data() + i * s.sample_bytes(), s.height, s.width, s.channels,
                       plan_resize(opt_, epoch, ids[i], s.height, s.width), images + i * info_.sample_bytes(),
                       info_.height, info_.width);
}

}  // namespace cnn
