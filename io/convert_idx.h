// IDX (MNIST-style) images + labels -> HDF5 dataset file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.h"

namespace cnn {

struct IdxConvertOptions {
  std::string images, labels, out;
  int num_classes = 0;                   // 0: max label + 1
  std::vector<std::string> class_names;  // optional, one per class
  std::string stats_from;                // take mean/std from this HDF5 file (test sets: the training set's)
  bool overwrite = false;                // LMDB output: replace an existing database
};

struct IdxData {
  DatasetInfo info;  // counts, shape, classes, names and mean/std (from --stats-from or the pixels)
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
};

// Reads and validates the IDX pair of `o` (counts match, labels fit num_classes, names per class); the
// common front half of every IDX converter. Throws Error(kExitData / kExitUsage).
IdxData load_idx(const IdxConvertOptions& o);

// Returns the written dataset's description. Throws Error(kExitData / kExitUsage).
DatasetInfo convert_idx_to_hdf5(const IdxConvertOptions& o);

}  // namespace cnn
