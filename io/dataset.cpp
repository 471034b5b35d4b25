#include "io/dataset.h"

#include "io/hdf5_dataset.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_env.h"
#include "src/base/error.h"

namespace cnn {

std::unique_ptr<Dataset> open_dataset(const std::string& path, const std::string& format) {
  if (format == "lmdb" || (format == "auto" && looks_like_lmdb(path))) return open_lmdb_dataset(path);
  if (format == "hdf5" || format == "auto") return open_hdf5_dataset(path);
  raise(kExitUsage, "unknown data format '%s' for '%s' (supported: hdf5, lmdb, auto)", format.c_str(),
        path.c_str());
}

}  // namespace cnn
