// Checkpoints: one HDF5 file per checkpoint, created and written collectively by all ranks through MPI-IO
// (parallel HDF5). Every parameter and every optimizer-state slice is its own named dataset, split by rows so
// each rank writes a disjoint share of the bytes; each dataset carries a CRC-32 of its contents, verified on
// load. A checkpoint is written to NAME.tmp, closed by all ranks, fsynced, then renamed to NAME by rank 0 and
// the directory fsynced: a crash at any moment leaves the previous or the new checkpoint, never a half one.
// Layout (docs/checkpoints.md):
//   /params/<layer>.<param>              float32, the parameter's shape (conv KRSC, linear [out,in])
//   /buffers/<layer>.<name>              float32, non-trained state (batch-norm running mean/var)
//   /optimizer/<state>/<layer>.<param>   float32, same shape (e.g. momentum)
//   /ema/<layer>.<param>                 float32, same shape: the weights' moving average (--train.ema only)
//   /swa/params/<layer>.<param>, /swa/buffers/<layer>.<name>: the weights' SWA average and the batch-norm
//                                        statistics recomputed for it (--train.swa_start_epoch only)
//   root attributes: format_version, step, epoch, step_in_epoch, global_batch, samples_seen, seed,
//   loss_scale, world_size, model, optimizer, num_params, config (resolved INI), version; and, optional
//   (absent from checkpoints written before mixed precision, which still load): precision,
//   loss_scale_growth, skipped_steps, optimizer_steps (docs/mixed_precision.md); ema_updates (--train.ema);
//   swa_models, swa_bn_models (--train.swa_start_epoch); net_input, num_classes (the network's input [H,W,C]
//   and class count) and, for a model imported from an ONNX file, /graph (uint8: that file's graph without its
//   weights, attribute crc32): see CheckpointGraph; class_names, mean, std, input_size (model_info.h: what
//   prediction needs; num_classes is shared with the graph's)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "src/checkpoint/model_info.h"

namespace cnn {

constexpr int kCheckpointFormatVersion = 1;

// The network a checkpoint was trained with, so that resuming or exporting it needs nothing else: the input
// shape and class count it was built for, and for a model imported from an ONNX file the file's graph without
// the weights (an ONNX ModelProto whose parameter initializers are graph inputs; src/model/onnx/onnx_graph_store.h).
// Absent from older checkpoints (input_h 0, onnx empty), which still load.
struct CheckpointGraph {
  int input_h = 0, input_w = 0, input_c = 0, classes = 0;
  std::string onnx;
  bool has_input() const { return input_h > 0 && input_w > 0 && input_c > 0 && classes > 0; }
};

struct CheckpointMeta {
  int64_t step = 0;           // optimizer steps completed
  int64_t epoch = 0;          // position of the next global batch: epoch and step within it
  int64_t step_in_epoch = 0;
  int64_t global_batch = 0;
  int64_t samples_seen = 0;
  uint64_t seed = 0;
  double loss_scale = 1.0;
  // Mixed precision (docs/mixed_precision.md). Parameters and optimizer state are fp32 in every precision.
  std::string precision;           // "fp32", "bf16", "fp16"; empty: not stored (an older checkpoint)
  int64_t loss_scale_growth = 0;   // the fp16 loss scaler's consecutive finite steps
  int64_t skipped_steps = 0;       // optimizer steps the loss scaler skipped
  int64_t optimizer_steps = -1;    // updates applied (AdamW's step count); -1: not stored, i.e. equal to step
  int64_t ema_updates = 0;         // updates folded into /ema (its warm-up position); 0 when there is none
  int64_t swa_models = 0;          // models averaged into /swa/params
  int64_t swa_bn_models = 0;       // swa_models when /swa/buffers were recomputed (0: never)
  int world_size = 0;
  std::string model, optimizer, config, version;
  CheckpointGraph graph;
  ModelInfo info;  // what prediction needs without the training data (absent from older checkpoints)
};

// A named host array the checkpoint stores: its dataset path, shape and data (num elements = product of shape).
struct CheckpointArray {
  std::string path;  // e.g. "params/conv1.weight"
  std::vector<int> shape;
  float* data = nullptr;
  size_t size() const;
};

struct CheckpointWriteStats {
  uint64_t bytes = 0;
  double seconds = 0;
};

// Collective. Writes `arrays` and `meta` to `path` atomically. Throws Error(kExitCheckpoint) on failure (the
// same verdict on every rank).
CheckpointWriteStats write_checkpoint(const std::string& path, const std::vector<CheckpointArray>& arrays,
                                      const CheckpointMeta& meta);

// Collective. Reads `path` into `arrays` (which name and shape what the model expects) and `meta`, verifying
// format version, model, names, shapes and checksums. On failure returns false with a message naming the file
// and the first mismatch (the same on every rank); `arrays` may then hold partial data. `layout_mismatch`, when
// given, tells a file whose datasets are not the model's (another model or optimizer) from a damaged one.
bool read_checkpoint(const std::string& path, const std::vector<CheckpointArray>& arrays, CheckpointMeta& meta,
                     std::string& error, bool* layout_mismatch = nullptr);

// Reads only the metadata and parameter names/shapes of a checkpoint (one process, serial HDF5).
bool read_checkpoint_meta(const std::string& path, CheckpointMeta& meta, std::string& error);

// Checkpoint file name for a step ("ckpt-0000001234.h5") and the committed checkpoints in `dir`, newest first.
std::string checkpoint_name(int64_t step);
std::vector<std::string> list_checkpoints(const std::string& dir);
// Removes stale NAME.tmp files in `dir` (left by a crash during a write); returns how many.
int remove_stale_tmp(const std::string& dir);
// Keeps the checkpoint of step `newest` (the one just written) and the `keep` - 1 newest of the older ones in
// `dir`, deleting the rest of the older ones; checkpoints of later steps (another timeline, e.g. damaged ones a
// resume skipped) are not this run's to rotate and stay. Returns the deleted paths.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, int64_t newest);

}  // namespace cnn
