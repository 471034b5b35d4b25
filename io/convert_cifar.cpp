#include "io/convert_cifar.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "io/hdf5_dataset.h"
#include "src/base/error.h"

namespace cnn {

namespace {
const int kSide = 32, kChannels = 3, kPlane = kSide * kSide, kImageBytes = kPlane * kChannels;
}

DatasetInfo convert_cifar_to_hdf5(const CifarConvertOptions& o) {
  if (o.variant != 10 && o.variant != 100)
    raise(kExitUsage, "--variant %d: CIFAR comes as 10 or 100", o.variant);
  if (o.coarse && o.variant != 100) raise(kExitUsage, "--coarse applies to CIFAR-100 only");
  if (o.inputs.empty()) raise(kExitUsage, "no input files given (--input a.bin,b.bin)");
  const int label_bytes = o.variant == 10 ? 1 : 2;
  const size_t record = label_bytes + kImageBytes;
  const int classes = o.variant == 10 ? 10 : o.coarse ? 20 : 100;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  std::vector<uint8_t> rec(record);
  for (const std::string& path : o.inputs) {
    std::ifstream f(path, std::ios::binary);
    if (!f) raise(kExitData, "cannot open CIFAR file '%s': %s", path.c_str(), std::strerror(errno));
    f.seekg(0, std::ios::end);
    const long long size = static_cast<long long>(f.tellg());
    f.seekg(0);
    if (size <= 0 || size % static_cast<long long>(record) != 0)
      raise(kExitData, "'%s' has %lld bytes, not a whole number of %zu-byte CIFAR-%d records (truncated, or the "
            "wrong --variant?)", path.c_str(), size, record, o.variant);
    const long long n = size / static_cast<long long>(record);
    for (long long r = 0; r < n; ++r) {
      if (!f.read(reinterpret_cast<char*>(rec.data()), static_cast<std::streamsize>(record)))
        raise(kExitData, "read error in '%s' at record %lld", path.c_str(), r);
      const int label = o.variant == 10 ? rec[0] : o.coarse ? rec[0] : rec[1];
      if (label >= classes)
        raise(kExitData, "'%s' record %lld: label %d is not below %d (wrong --variant or a corrupt file?)",
              path.c_str(), r, label, classes);
      labels.push_back(label);
      const uint8_t* chw = rec.data() + label_bytes;
      const size_t base = pixels.size();
      pixels.resize(base + kImageBytes);
      for (int p = 0; p < kPlane; ++p)
        for (int c = 0; c < kChannels; ++c) pixels[base + p * kChannels + c] = chw[c * kPlane + p];
    }
  }
  DatasetInfo info;
  info.count = static_cast<int64_t>(labels.size());
  info.height = info.width = kSide;
  info.channels = kChannels;
  info.num_classes = classes;
  info.class_names = o.class_names;
  if (!info.class_names.empty() && static_cast<int>(info.class_names.size()) != classes)
    raise(kExitUsage, "--class-names lists %zu names for %d classes", info.class_names.size(), classes);
  if (!o.stats_from.empty()) {
    auto ref = open_hdf5_dataset(o.stats_from);
    if (ref->info().channels != kChannels)
      raise(kExitUsage, "--stats-from '%s' has %d channels, not 3", o.stats_from.c_str(), ref->info().channels);
    info.mean = ref->info().mean;
    info.std = ref->info().std;
  } else {
    compute_channel_stats(pixels.data(), info.count, kPlane, kChannels, info.mean, info.std);
  }
  write_hdf5_dataset(o.out, info, pixels.data(), labels.data());
  return info;
}

}  // namespace cnn
