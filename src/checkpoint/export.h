// Weights-only export of a checkpoint: one HDF5 dataset per parameter, /<layer>/<param> (e.g. /conv1/weight),
// float32 in cnntrain's layouts (conv KRSC = [out, kh, kw, in]; linear [out, in]; biases [out]); root
// attributes model, step, format = "cnntrain-weights", weights ("raw" or "ema"), layout notes. Serial HDF5;
// one process. With `ema` the parameters are the checkpoint's moving average of the weights (/ema, written by
// --train.ema runs) in place of the weights themselves; the batch-norm buffers are the same either way.
#pragma once
#include <cstdint>
#include <string>

namespace cnn {

struct ExportStats {
  size_t tensors = 0;
  size_t params = 0;   // trained parameters: the count training reports
  size_t buffers = 0;  // values of the non-trained state exported with them (batch-norm running statistics)
  std::string model;
  int64_t step = 0;
};

// Verifies every parameter's CRC-32 while copying. Throws Error(kExitCheckpoint) naming the file and dataset.
ExportStats export_weights(const std::string& checkpoint, const std::string& out, bool ema = false);

}  // namespace cnn
