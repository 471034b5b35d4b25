#include "io/convert_idx.h"

#include <algorithm>

#include "io/dataset.h"
#include "io/hdf5_dataset.h"
#include "io/idx.h"
#include "src/base/error.h"

namespace cnn {

IdxData load_idx(const IdxConvertOptions& o) {
  IdxImages im = read_idx_images(o.images);
  IdxData d;
  d.labels = read_idx_labels(o.labels);
  if (static_cast<int64_t>(d.labels.size()) != im.count)
    raise(kExitData, "'%s' has %lld images but '%s' has %zu labels; they must match one to one", o.images.c_str(),
          (long long)im.count, o.labels.c_str(), d.labels.size());
  if (im.count == 0) raise(kExitData, "'%s' holds no images", o.images.c_str());
  DatasetInfo& info = d.info;
  info.count = im.count;
  info.height = im.rows;
  info.width = im.cols;
  info.channels = 1;
  const int maxl = *std::max_element(d.labels.begin(), d.labels.end());
  info.num_classes = o.num_classes > 0 ? o.num_classes : maxl + 1;
  if (maxl >= info.num_classes)
    raise(kExitUsage, "--num-classes %d is too small: the labels in '%s' go up to %d", info.num_classes,
          o.labels.c_str(), maxl);
  info.class_names = o.class_names;
  if (!info.class_names.empty() && static_cast<int>(info.class_names.size()) != info.num_classes)
    raise(kExitUsage, "--class-names lists %zu names for %d classes", info.class_names.size(), info.num_classes);
  if (!o.stats_from.empty()) {
    auto ref = open_dataset(o.stats_from, "auto");
    if (ref->info().channels != 1)
      raise(kExitUsage, "--stats-from '%s' has %d channels, not 1", o.stats_from.c_str(), ref->info().channels);
    info.mean = ref->info().mean;
    info.std = ref->info().std;
  } else {
    compute_channel_stats(im.pixels.data(), im.count, im.rows * im.cols, 1, info.mean, info.std);
  }
  d.pixels = std::move(im.pixels);
  return d;
}

DatasetInfo convert_idx_to_hdf5(const IdxConvertOptions& o) {
  IdxData d = load_idx(o);
  write_hdf5_dataset(o.out, d.info, d.pixels.data(), d.labels.data());
  return d.info;
}

}  // namespace cnn
