// An imported model's graph as a checkpoint stores it (docs/checkpoints.md, "The model's graph"): the file's
// graph without the values of the parameters and buffers, which the checkpoint holds anyway; enough to build the
// same net again when the ONNX file is gone (--resume, cnntrain-data export).
#pragma once
#include <string>
#include <vector>

#include "src/model/onnx/onnx_model.h"

namespace cnn {

// `model` with the initializers named in `weights` turned into graph inputs of the same type and shape,
// serialised at the model's own opset. The same file always gives the same bytes, so two files hold the same
// graph (whatever their weights) exactly when their stored graphs are equal.
std::string stored_onnx_graph(const OnnxModel& model, const std::vector<std::string>& weights);
// The model back from stored bytes (`origin` names them in messages): those graph inputs are initializers
// again, filled with zeros. Throws Error(kExitUsage) if the bytes are no such graph.
OnnxModel restore_onnx_graph(const std::string& bytes, const std::string& origin);

}  // namespace cnn
