#include "io/resized_dataset.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace cnn {

ResizedDataset::ResizedDataset(std::unique_ptr<Dataset> stored, const ResizeOptions& o, int threads)
    : stored_(std::move(stored)), opt_(o), threads_(std::max(threads, 1)), info_(stored_->info()) {
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
  auto resize = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i)
      resize_antialiased(raw.data() + i * s.sample_bytes(), s.height, s.width, s.channels,
                         plan_resize(opt_, epoch, ids[i], s.height, s.width), images + i * info_.sample_bytes(),
                         info_.height, info_.width);
  };
  // Contiguous shares; each sample's result depends only on its own bytes and id, not on the split.
  const size_t threads = std::min<size_t>(threads_, k);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(resize, k * t / threads, k * (t + 1) / threads);
  resize(0, threads > 1 ? k / threads : k);
  for (auto& th : pool) th.join();
}

}  // namespace cnn
