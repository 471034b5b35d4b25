// ONNX import: a model file's graph (read_onnx) becomes a Net graph of cnntrain layers, and its initializers
// the net's initial parameters and batch-norm statistics, under the file's own tensor names (so a trained
// model's names are the PyTorch state_dict's). Layouts convert here: OIHW convolution filters to KRSC, and a
// Gemm that follows the flattening of a spatial map gets its weight columns reordered from ONNX's C,H,W to
// cnntrain's H,W,C order, so that the results are the same. Every problem is exit 2 naming the node, its op
// type and what to do (docs/models.md, "Bring your own network").
#pragma once
#include <map>
#include <string>
#include <vector>

#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/model/onnx/onnx_model.h"

namespace cnn {

struct OnnxImport {
  // Parameter and buffer values by their (final) names, in cnntrain's layouts.
  std::map<std::string, std::vector<float>> values;
  // The graph holds no BatchNormalization (the exporter folded it into the convolutions).
  bool batchnorm_folded = false;
};

// Adds the layers of `model`'s graph to `net` (built for the dataset's input shape and class count) and
// names their tensors after the file's. `bn` supplies what ONNX does not say (ghost or synchronised batch
// norm); momentum and epsilon come from the file.
OnnxImport import_onnx(const OnnxModel& model, Net& net, const BnOptions& bn);
// Copies the file's values into the built net's parameters and buffers (every one of them must be there).
void load_onnx_values(const OnnxImport& imp, Net& net);

}  // namespace cnn
