#include "io/dataset.h"

#include "io/hdf5_dataset.h"
#include "src/error.h"

namespace cnn {

std::unique_ptr<Dataset> open_dataset(const std::string& path, const std::string& format) {
  if (format == "hdf5" || format == "auto") return open_hdf5_dataset(path);
  raise(kExitUsage, "unknown data format '%s' for '%s' (supported: hdf5, auto)", format.c_str(), path.c_str());
}

}  // namespace cnn
