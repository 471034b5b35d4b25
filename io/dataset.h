// A labelled image dataset, read by sample id. Implementations: HDF5 (io/hdf5_dataset.*) and LMDB.
// Images are uint8 HWC (NHWC when batched). Readers are opened on every rank and read only the samples a
// rank asks for; labels are validated when the dataset is opened so bad data fails before training starts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cnn {

struct DatasetInfo {
  int64_t count = 0;
  int height = 0, width = 0, channels = 0;
  int num_classes = 0;
  std::vector<float> mean, std;  // per channel, in 0..255 units
  std::vector<std::string> class_names;
  size_t sample_bytes() const { return static_cast<size_t>(height) * width * channels; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual const std::string& path() const = 0;
  // Reads samples ids[0..k) (any order, repeats allowed) into images (k * sample_bytes, in the order given)
  // and labels. Throws cnn::Error(kExitData) naming the file and sample id on any failure.
  virtual void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) = 0;
  // Label of one sample (held in memory after open).
  virtual int32_t label(int64_t id) const = 0;
  // The epoch of the following reads, for readers whose decoding is randomised per (seed, epoch, sample)
  // (random-resized crops of encoded images). The loader calls it before each batch.
  virtual void set_epoch(int64_t epoch) {}
};

// Opens `path` as `format` ("hdf5", "lmdb", or "auto": by content). Throws cnn::Error(kExitData).
std::unique_ptr<Dataset> open_dataset(const std::string& path, const std::string& format = "auto");

}  // namespace cnn
