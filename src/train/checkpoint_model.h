// A checkpoint's network rebuilt for inference on the CPU, from the checkpoint alone: the zoo model it names or
// the graph it stores (an imported model's), sized by its stored input shape and class count, with its
// parameters and buffers. What `cnntrain-data export --format onnx` exports (docs/models.md, "Exporting to
// ONNX") and what the ONNX export tests run (tests/onnx/ckpt_logits.cpp).
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

struct CheckpointModel {
  CheckpointMeta meta;
  std::unique_ptr<Backend> be;
  std::unique_ptr<Net> net;                    // built for `max_batch` samples, the weights loaded
  std::vector<float> params, buffers;          // host copies of what was loaded
};

// Throws Error: kExitCheckpoint for an unreadable checkpoint or one without the weights asked for, kExitUsage
// for a model this build cannot construct.
CheckpointModel load_checkpoint_model(const std::string& checkpoint, ExportWeights which, int max_batch = 1);

// What an exported model records about its inputs (ONNX metadata_props): class_names, mean and std (per
// channel, 0..255 units) and input_size ("HxWxC"), as far as the checkpoint knows them, plus the checkpoint's
// model, step and weights.
std::map<std::string, std::string> export_metadata(const CheckpointModel& m, ExportWeights which);

// The checkpoint's model as an ONNX file (opset 17, checked by ONNX's checker before it is written).
OnnxModel export_checkpoint_onnx(const std::string& checkpoint, const std::string& out, ExportWeights which);

}  // namespace cnn
