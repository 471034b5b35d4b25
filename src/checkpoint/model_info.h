// What a trained model needs to be used without its training data (docs/checkpoints.md): its class count and
// names, the per-channel mean/std its inputs were normalised with, and its input size. Checkpoints and HDF5
// weight exports store it as root attributes (num_classes, class_names, mean, std, input_size = [H, W, C]);
// an ONNX export as
// metadata_props with the same keys (as_props/from_props). Files written before these attributes lack them
// and still load; predicting images from one then says what to pass instead.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/dataset.h"

namespace cnn {

struct ModelInfo {
  int num_classes = 0;                   // 0: not recorded
  std::vector<std::string> class_names;  // empty: not recorded (or the dataset had none)
  std::vector<double> mean, std;         // per channel, 0..255 units; empty: not recorded
  int height = 0, width = 0, channels = 0;  // the network input; 0: not recorded
  bool has_stats() const { return !mean.empty() && mean.size() == std.size(); }
  bool has_input_size() const { return height > 0 && width > 0 && channels > 0; }
};

// From the training set and the network's input size (which --data.image_size may make differ from the set's).
ModelInfo model_info_of(const DatasetInfo& train, int height, int width, int channels);

// Root attributes of an open HDF5 file (its hid_t; this header stays free of hdf5.h, which parallel HDF5 makes
// include mpi.h); only what `info` records is written. Throws Error naming the attribute.
void write_model_info(int64_t file, const ModelInfo& info);
// Absent attributes leave the defaults (older files).
ModelInfo read_model_info(int64_t file);

// The same as string key/value pairs (ONNX metadata_props): class_names comma-joined with commas in names
// escaped as "\,", num_classes a number, mean/std comma-separated, input_size "HxWxC".
std::map<std::string, std::string> model_info_props(const ModelInfo& info);
ModelInfo model_info_from_props(const std::map<std::string, std::string>& props);

}  // namespace cnn
