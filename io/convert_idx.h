// IDX (MNIST-style) images + labels -> HDF5 dataset file.
#pragma once
#include <string>
#include <vector>

#include "io/dataset.h"

namespace cnn {

struct IdxConvertOptions {
  std::string images, labels, out;
  int num_classes = 0;                   // 0: max label + 1
  std::vector<std::string> class_names;  // optional, one per class
  std::string stats_from;                // take mean/std from this HDF5 file (test sets: the training set's)
};

// Returns the written dataset's description. Throws Error(kExitData / kExitUsage).
DatasetInfo convert_idx_to_hdf5(const IdxConvertOptions& o);

}  // namespace cnn
