// How a batch reaches the step buffers of the backend, as its BackendCaps::device_image_prep says. The CPU
// backend gets float images that the loader thread normalised (and augmented) while the previous step ran.
// Device backends (CUDA, the emulator) get the uint8 pixels and the augmentation draws
// (Backend::upload_images, then Backend::mix_images for mixup/cutmix): a quarter of the bytes cross the bus,
// the device does the pixel work, and the copy does not wait for the step still running.
#pragma once
#include <cstdint>
#include <vector>

#include "io/dataset.h"
#include "io/loader.h"
#include "kernels/backend.h"
#include "src/train/step.h"

namespace cnn {

class InputPath {
 public:
  // `norm`: the training set's statistics (test images are normalised like the training images).
  InputPath(Backend& be, const StepBuffers& buf, const DatasetInfo& norm);

  LoaderOutput loader_output() const { return device_ ? LoaderOutput::kDevice : LoaderOutput::kHost; }
  // Images, labels and sample ids of a loader batch into the step buffers.
  void upload(const Batch& b);
  // n raw test images (uint8 NHWC of `shape`) and labels, without augmentation.
  void upload_eval(const uint8_t* pixels, const int32_t* labels, int n, const DatasetInfo& shape);

 private:
  Backend& be_;
  StepBuffers buf_;
  const DatasetInfo& norm_;
  bool device_;
  std::vector<float> img_;
};

}  // namespace cnn
