// IDX files (the MNIST/Fashion-MNIST format), plain or gzipped: a big-endian header (magic 0x0000080D where
// 08 = uint8 and D = number of dimensions, then D uint32 sizes) followed by the uint8 data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct IdxImages {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major
};

// Throw cnn::Error(kExitData) naming the file and what is wrong.
IdxImages read_idx_images(const std::string& path);
std::vector<int32_t> read_idx_labels(const std::string& path);

}  // namespace cnn
