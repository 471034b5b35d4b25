// Weights-only export of a checkpoint: one HDF5 dataset per parameter, /<layer>/<param> (e.g. /conv1/weight),
// float32 in cnntrain's layouts (conv KRSC = [out, kh, kw, in]; linear [out, in]; biases [out]); root
// attributes model, step, format = "cnntrain-weights", weights ("raw", "ema" or "swa"), layout notes. Serial
// HDF5; one process. Which weights: kEma, the checkpoint's moving average of the weights (/ema, written by
// --train.ema runs) with the model's batch-norm buffers; kSwa, the SWA average (/swa/params, written by
// --train.swa_start_epoch runs) with the batch-norm statistics recomputed for it (/swa/buffers), which only a
// checkpoint written after the run's last step has.
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
enum class ExportWeights { kRaw, kEma, kSwa };
// "raw", "ema", "swa": the --weights value and the exported file's attribute.
const char* export_weights_name(ExportWeights which);
ExportStats export_weights(const std::string& checkpoint, const std::string& out,
                           ExportWeights which = ExportWeights::kRaw);

}  // namespace cnn
