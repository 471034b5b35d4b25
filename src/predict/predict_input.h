// What `cnntrain-data predict` reads (docs/models.md, "Prediction"): an HDF5 or LMDB dataset, one image file,
// or a folder of images (searched recursively, in path order), each presented at the model's input size as
// evaluation presents the test set: HDF5 images of another size resized as --data.test_resize does, LMDB
// records and image files decoded, resized and center-cropped.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/dataset.h"

namespace cnn {

class PredictInput {
 public:
  virtual ~PredictInput() = default;
  virtual int64_t count() const = 0;
  // The dataset's own description (labels, classes, mean/std); null for image files.
  virtual const DatasetInfo* dataset() const = 0;
  // Samples [first, first + n) as uint8 NHWC of the model's input size; labels (-1 for image files).
  virtual void read(int64_t first, int n, uint8_t* pixels, int32_t* labels) = 0;
  // How the CSV names sample i: the image's path, or its index in a dataset.
  virtual std::string name(int64_t i) const = 0;
};

// Opens `path` for a model of input h x w x c; test_resize as --data.test_resize (0: the default 0.875 crop).
// Throws Error(kExitData) naming the file for missing, unreadable or unfitting inputs.
std::unique_ptr<PredictInput> open_predict_input(const std::string& path, int h, int w, int c, int test_resize);

// The dataset's description before the model is known (its input size and classes fill in what an older
// checkpoint lacks); nothing for image files.
bool peek_dataset_info(const std::string& path, DatasetInfo& info);

}  // namespace cnn
