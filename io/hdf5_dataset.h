// HDF5 datasets (schema in docs/data.md): /images uint8 [N,H,W,C] (or [N,H,W] for one channel) chunked along N,
// /labels integer [N]; attributes num_classes, mean[C], std[C] (0..255 units), optional class_names.
#pragma once
#include <memory>
#include <string>

#include "io/dataset.h"

namespace cnn {

struct Hdf5ReadOptions {
  size_t chunk_cache_mb = 256;  // cache of /images chunks per reader; a set that fits is read from disk once
};

std::unique_ptr<Dataset> open_hdf5_dataset(const std::string& path, const Hdf5ReadOptions& opt = {});

// Writes a dataset file atomically (PATH.tmp, then rename). images: count * H*W*C bytes, NHWC.
void write_hdf5_dataset(const std::string& path, const DatasetInfo& info, const uint8_t* images,
                        const int32_t* labels);

// Per-channel mean and std (0..255 units) of NHWC uint8 images.
void compute_channel_stats(const uint8_t* images, int64_t count, int channels_hw, int channels,
                           std::vector<float>& mean, std::vector<float>& std);

}  // namespace cnn
