// Weights-only export of a checkpoint: one HDF5 dataset per parameter, /<layer>/<param> (e.g. /conv1/weight),
// float32 in cnntrain's layouts (conv KRSC = [out, kh, kw, in]; linear [out, in]; biases [out]); root
// attributes model, step, format = "cnntrain-weights", weights ("raw", "ema" or "swa"), layout notes. Serial
// HDF5; one process. Which weights: kEma, the checkpoint's moving average of the weights (/ema, written by
// --train.ema runs) with the model's batch-norm buffers; kSwa, the SWA average (/swa/params, written by
// --train.swa_start_epoch runs) with the batch-norm statistics recomputed for it (/swa/buffers), which only a
// checkpoint written after the run's last step has.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/checkpoint/checkpoint.h"

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
// The weights a --weights value names; Error(kExitUsage) "COMMAND: --weights must be raw, ema or swa" else.
ExportWeights parse_export_weights(const std::string& name, const char* command);
ExportStats export_weights(const std::string& checkpoint, const std::string& out,
                           ExportWeights which = ExportWeights::kRaw);
// The same weights by name ("conv1.weight", "bn1.running_mean"): the parameters of `which` and the buffers
// inference needs with them, each verified against its CRC-32; `meta` gets the checkpoint's metadata. One
// process, serial HDF5. Throws Error(kExitCheckpoint) naming the file and, for a checkpoint without the
// average asked for, the way out: "<retry> with --weights raw" (export_weights: "export it").
std::map<std::string, std::vector<float>> read_checkpoint_weights(const std::string& checkpoint, ExportWeights which,
                                                                  CheckpointMeta& meta, const std::string& retry);

}  // namespace cnn
