// CIFAR-10/100 binary version (the official data_batch_*.bin / test_batch.bin, train.bin / test.bin) -> HDF5.
// A CIFAR-10 record is 1 label byte + 3072 image bytes; a CIFAR-100 record is a coarse (0..19) and a fine
// (0..99) label byte + 3072 image bytes. Images are 32x32x3 stored channel-major (1024 R, 1024 G, 1024 B,
// each row-major), converted to the HWC layout of the HDF5 schema.
#pragma once
#include <string>
#include <vector>

#include "io/dataset.h"

namespace cnn {

struct CifarConvertOptions {
  std::vector<std::string> inputs;  // one or more .bin files, concatenated in this order
  std::string out;
  int variant = 10;                 // 10 or 100
  bool coarse = false;              // CIFAR-100: the 20 superclass labels instead of the 100 fine ones
  std::vector<std::string> class_names;
  std::string stats_from;           // take mean/std from this HDF5 file (test sets: the training set's)
};

// Returns the written dataset's description. Throws Error(kExitData) naming the file and record on bad input,
// Error(kExitUsage) on bad options.
DatasetInfo convert_cifar_to_hdf5(const CifarConvertOptions& o);

}  // namespace cnn
