// cnntrain's metadata for an LMDB dataset: num_classes, per-channel mean/std and class names.
//
// It lives in a sidecar text file (LMDB directory/cnntrain_meta.txt), not in a key of the database: Caffe
// parses every key of the main database as a Datum, so an extra key would break the Caffe compatibility that
// is the reason to use LMDB at all. Caffe ignores the extra file. Format, one item per line:
//   num_classes 10
//   mean 72.9                (one value per channel, 0..255 units)
//   std 90.0
//   class_name T-shirt/top   (one line per class, in label order; the rest of the line is the name)
// Lines starting with '#' are comments. Missing items fall back to values computed at open.
#pragma once
#include <string>
#include <vector>

namespace cnn {

struct LmdbMeta {
  int num_classes = 0;
  std::vector<float> mean, std;
  std::vector<std::string> class_names;
};

// False when the file does not exist; throws cnn::Error(kExitData) naming the line when it is malformed.
bool read_lmdb_meta(const std::string& meta_path, LmdbMeta* out);
void write_lmdb_meta(const std::string& meta_path, const LmdbMeta& meta);

}  // namespace cnn
