// --init.from: initial weights from a file, matched by name (docs/models.md "Fine-tuning"). Weights only: a
// run started this way begins at step 0 with fresh optimizer state, schedule and data order (unlike --resume).
// Sources, told apart by their first bytes:
//   a cnntrain checkpoint (HDF5 /params and /buffers, any rank count) or weights export (HDF5 /LAYER/PARAM,
//     `cnntrain-data export`): cnntrain's layouts (conv KRSC);
//   an ONNX file (its initializers) or a safetensors file (torchvision/timm state-dict names, PyTorch layouts:
//     conv OIHW, converted to KRSC). "num_batches_tracked" and a DataParallel "module." prefix are ignored.
// Parameters and batch-norm running statistics whose name is missing from the file, or whose shape differs
// (a classifier for another class count), keep the fresh initialisation Net::build gave them.
#pragma once
#include <string>
#include <vector>

#include "src/model/net.h"
#include "src/train/freeze.h"
#include "src/train/safetensors.h"

namespace cnn {

struct InitFromOptions {
  std::string path;
  std::string skip;     // NamePattern (src/train/freeze.h): freshly initialised on purpose
  bool strict = false;  // missing or mismatched names are an error (exit 2)
};

struct InitFromReport {
  std::string format;  // "checkpoint", "hdf5 export", "onnx", "safetensors"
  size_t loaded = 0;   // tensors taken from the file
  // Freshly initialised: absent from the file, of another shape ("NAME: file AxB, model CxD"), skipped.
  std::vector<std::string> missing, mismatched, skipped;
  std::vector<std::string> unused;  // tensors of the file the model has no place for
  std::vector<std::string> fresh() const;  // missing + mismatched + skipped, names only
};

// The named tensors of a weights file, in the model's layouts (conv weights KRSC), "module." and
// "num_batches_tracked" left out; `format` is set. Throws Error(kExitUsage) naming the file for anything
// unreadable.
std::vector<NamedTensor> read_weight_file(const std::string& path, std::string* format);
// The same for a safetensors file (also `cnntrain-data predict`'s weights-only source).
std::vector<NamedTensor> read_safetensors_weights(const std::string& path);

// Copies `tensors` (as read_weight_file gives them) into the net's parameters and buffers (after build())
// where name and shape match, except those `skip` matches, then refreshes the 16-bit weight copy. Raises
// nothing: the report says what did not fit.
InitFromReport load_named_tensors(Net& net, const std::vector<NamedTensor>& tensors, const NamePattern& skip);

// Overwrites the net's parameters and buffers (after build()) with the file's tensors of the same names and
// shapes, then refreshes the 16-bit weight copy. Throws Error(kExitUsage) when `strict` and anything is
// missing or mismatched (the message lists them), or when nothing at all matches (the wrong model?).
InitFromReport init_from_file(Net& net, const InitFromOptions& o);

}  // namespace cnn
