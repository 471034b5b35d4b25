#include "src/train/eval_report.h"

#include <algorithm>
#include <cmath>

#include "io/image_codec.h"

namespace cnn {

void add_confusion(int n, int classes, const float* logits, const int32_t* labels, std::vector<int64_t>& confusion) {
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    const int64_t predicted = std::max_element(z, z + classes) - z;
    ++confusion[static_cast<size_t>(labels[i]) * classes + predicted];
  }
}

void sum_confusion(Collectives& comm, std::vector<int64_t>& confusion) {
  // Counts below 2^53 are exact in doubles, far beyond any test set.
  std::vector<double> d(confusion.begin(), confusion.end());
  comm.allreduce_sum_host(d.data(), d.size(), "confusion matrix");
  for (size_t i = 0; i < d.size(); ++i) confusion[i] = static_cast<int64_t>(std::llround(d[i]));
}

std::vector<double> per_class_accuracy(const std::vector<int64_t>& confusion, int classes) {
  std::vector<double> acc(classes, NAN);
  for (int t = 0; t < classes; ++t) {
    int64_t row = 0;
    for (int p = 0; p < classes; ++p) row += confusion[static_cast<size_t>(t) * classes + p];
    if (row > 0) acc[t] = static_cast<double>(confusion[static_cast<size_t>(t) * classes + t]) / row;
  }
  return acc;
}

std::string confusion_png(const std::vector<int64_t>& confusion, int classes) {
  const int cell = std::max(1, std::min(32, 640 / std::max(classes, 1)));
  const int side = cell * classes;
  std::vector<uint8_t> rgb(static_cast<size_t>(side) * side * 3);
  for (int t = 0; t < classes; ++t) {
    int64_t row = 0;
    for (int p = 0; p < classes; ++p) row += confusion[static_cast<size_t>(t) * classes + p];
    for (int p = 0; p < classes; ++p) {
      const double f = row ? static_cast<double>(confusion[static_cast<size_t>(t) * classes + p]) / row : 0;
      const uint8_t px[3] = {static_cast<uint8_t>(255 - 247 * f), static_cast<uint8_t>(255 - 207 * f),
                             static_cast<uint8_t>(255 - 148 * f)};
      for (int y = t * cell; y < (t + 1) * cell; ++y)
        for (int x = p * cell; x < (p + 1) * cell; ++x)
          std::copy(px, px + 3, &rgb[(static_cast<size_t>(y) * side + x) * 3]);
    }
  }
  return encode_png(rgb.data(), side, side, 3);
}

}  // namespace cnn
