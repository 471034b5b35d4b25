// Generated images for throughput measurements without a dataset (--data.synthetic NxHxWxC:CLASSES): N
// samples of HxWxC uint8 pixels and labels in [0, CLASSES). The pixels are a pool of 64 distinct images
// drawn from a counter-based hash at open; sample i is pool image i % 64 with label (i % 64) % CLASSES, so
// reading costs a copy, as a cached real dataset does, and the labels are a function of the image.
#pragma once
#include <memory>
#include <string>

#include "io/dataset.h"

namespace cnn {

struct SyntheticSpec {
  int64_t count = 0;
  int height = 0, width = 0, channels = 0, classes = 0;
};

// "NxHxWxC:CLASSES"; throws Error(kExitUsage) naming --data.synthetic.
SyntheticSpec parse_synthetic_spec(const std::string& s);
std::unique_ptr<Dataset> make_synthetic_dataset(const SyntheticSpec& spec, uint64_t seed);

}  // namespace cnn
