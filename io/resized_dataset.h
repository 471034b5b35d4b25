// A dataset of one stored image size (HDF5) presented at another, resized and cropped as io/resize.h says:
// read() reads the stored images and fits each to the target, so the loader, both input paths (host and
// device, src/train/input_path.h) and evaluation see uint8 images of the target size. The resize runs here,
// on the loader thread, rather than as a device kernel: the device input path and its kernels work on images
// of the network's size, and keeping the resize before the split gives both paths the same bytes.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "io/dataset.h"
#include "io/resize.h"

namespace cnn {

class ResizedDataset : public Dataset {
 public:
  // threads: how many threads one read() resizes with (the stored images are read on the caller's). Throws
  // Error(kExitUsage) when an evaluation resize is smaller than the target (resize_center_crop).
  ResizedDataset(std::unique_ptr<Dataset> stored, const ResizeOptions& o, int threads = 1);

  const DatasetInfo& info() const override { return info_; }
  const std::string& path() const override { return stored_->path(); }
  void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) override;
  int32_t label(int64_t id) const override { return stored_->label(id); }
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }

 private:
  std::unique_ptr<Dataset> stored_;
  ResizeOptions opt_;
  int threads_;
  DatasetInfo info_;
  std::atomic<int64_t> epoch_{0};
};

}  // namespace cnn
