// Test helper until cnntrain-data exposes the LMDB converters: h5_to_lmdb IN.h5 OUT_DIR [--overwrite].
#include <cstdio>
#include <cstring>

#include "io/convert_lmdb.h"
#include "src/error.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: h5_to_lmdb IN.h5 OUT_DIR [--overwrite]\n");
    return cnn::kExitUsage;
  }
  try {
    cnn::DatasetInfo info = cnn::convert_hdf5_to_lmdb(argv[1], argv[2], argc > 3 && !std::strcmp(argv[3], "--overwrite"));
    std::printf("wrote %s: %lld records\n", argv[2], static_cast<long long>(info.count));
  } catch (const cnn::Error& e) {
    std::fprintf(stderr, "h5_to_lmdb: error: %s\n", e.what());
    return e.code();
  }
  return 0;
}
