#include "io/synthetic_dataset.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/rng.h"
#include "src/base/error.h"

namespace cnn {

namespace {

constexpr int kPool = 64;

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(const SyntheticSpec& s, uint64_t seed) : spec_(s) {
    path_ = strprintf("synthetic:%lldx%dx%dx%d:%d", (long long)s.count, s.height, s.width, s.channels, s.classes);
    info_.count = s.count;
    info_.height = s.height;
    info_.width = s.width;
    info_.channels = s.channels;
    info_.num_classes = s.classes;
    info_.mean.assign(s.channels, 127.5f);  // the pixels are uniform on 0..255
    info_.std.assign(s.channels, 73.9f);
    const size_t bytes = info_.sample_bytes();
    pool_.resize(kPool * bytes);
    CounterRng rng(seed, 0x53594e54ull);
    for (size_t i = 0; i < pool_.size(); i += 8) {
      const uint64_t r = rng.next();
      std::memcpy(&pool_[i], &r, pool_.size() - i < 8 ? pool_.size() - i : 8);
    }
  }
  const DatasetInfo& info() const override { return info_; }
  const std::string& path() const override { return path_; }
  void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) override {
    const size_t bytes = info_.sample_bytes();
    for (size_t i = 0; i < k; ++i) {
      if (ids[i] < 0 || ids[i] >= spec_.count)
        raise(kExitData, "%s: sample %lld out of range", path_.c_str(), (long long)ids[i]);
      std::memcpy(images + i * bytes, &pool_[(ids[i] % kPool) * bytes], bytes);
      labels[i] = label(ids[i]);
    }
  }
  int32_t label(int64_t id) const override { return static_cast<int32_t>((id % kPool) % spec_.classes); }

 private:
  SyntheticSpec spec_;
  DatasetInfo info_;
  std::string path_;
  std::vector<uint8_t> pool_;
};

}  // namespace

SyntheticSpec parse_synthetic_spec(const std::string& s) {
  SyntheticSpec spec;
  long long n = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%lldx%dx%dx%d:%d%c", &n, &spec.height, &spec.width, &spec.channels, &spec.classes,
                  &tail) != 5 || n < 1 || spec.height < 1 || spec.width < 1 || spec.channels < 1 || spec.classes < 2 ||
      spec.height > 65536 || spec.width > 65536 || spec.channels > 4096)
    raise(kExitUsage, "option --data.synthetic: bad value '%s': expected NxHxWxC:CLASSES with positive sizes and at "
          "least 2 classes, e.g. 12800x224x224x3:1000", s.c_str());
  spec.count = n;
  return spec;
}

std::unique_ptr<Dataset> make_synthetic_dataset(const SyntheticSpec& spec, uint64_t seed) {
  return std::make_unique<SyntheticDataset>(spec, seed);
}

}  // namespace cnn
