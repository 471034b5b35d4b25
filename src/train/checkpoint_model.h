// A checkpoint's network rebuilt for inference on the CPU, from the checkpoint alone: the zoo model it names or
// the graph it stores (an imported model's), with its batch-norm options, sized by its stored input shape and
// class count, with the weights asked for. The one place that knows how: `cnntrain-data export --format onnx`
// (docs/models.md, "Exporting to ONNX"), `cnntrain-data predict` (src/predict/predict_model.h) and the ONNX
// export tests (tests/onnx/ckpt_logits.cpp) all load checkpoints through it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/checkpoint/checkpoint.h"
#include "src/checkpoint/export.h"
#include "src/model/net.h"
#include "src/model/onnx/onnx_model.h"

namespace cnn {

struct CheckpointLoad {
  ExportWeights which = ExportWeights::kRaw;
  int max_batch = 1;    // the net is built for this many samples per forward
  Backend* be = nullptr;  // null: a one-thread CPU backend of the model's own
  // What the way out of a missing average says: "<retry> with --weights raw" ("export it", "predict from it").
  std::string retry = "export it";
  // An older checkpoint records no input shape and class count, and the training set its config names tells
  // them only while it can be opened: then `fallback`'s stand in, when it has both. `fallback_option` names
  // the option that supplies them (the error is then exit 2, naming it; without one, exit 4).
  ModelInfo fallback;
  std::string fallback_option;
};

struct CheckpointModel {
  CheckpointMeta meta;
  std::unique_ptr<Backend> own_be;  // the backend made when CheckpointLoad::be is null (outlives `net`)
  Backend* be = nullptr;            // the net's: own_be or CheckpointLoad::be
  std::unique_ptr<Net> net;         // built for `max_batch` samples, the weights loaded
  std::vector<float> params, buffers;  // host copies of what was loaded
};

// An imported model without a stored graph (a checkpoint written before they were stored) is built from the
// ONNX file at the path it was trained from, if it is still there. Throws Error: kExitCheckpoint for an
// unreadable checkpoint, one without the weights asked for or without a graph to build, kExitUsage for a model
// this build cannot construct; for the input shape of an older checkpoint, see CheckpointLoad::fallback.
CheckpointModel load_checkpoint_model(const std::string& checkpoint, const CheckpointLoad& how);

// What an exported model records about its inputs (ONNX metadata_props): class_names, mean and std (per
// channel, 0..255 units) and input_size ("HxWxC"), as far as the checkpoint knows them, plus the checkpoint's
// model, step and weights.
std::map<std::string, std::string> export_metadata(const CheckpointModel& m, ExportWeights which);

// The checkpoint's model as an ONNX file (opset 17, checked by ONNX's checker before it is written).
OnnxModel export_checkpoint_onnx(const std::string& checkpoint, const std::string& out, ExportWeights which);

}  // namespace cnn
