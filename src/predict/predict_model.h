// The network `cnntrain-data predict` runs (docs/models.md, "Prediction"): built and loaded from a cnntrain
// checkpoint (any rank count), an ONNX file, an HDF5 weights export of a zoo model, or a PyTorch state dict
// saved as safetensors (--init.from's names and layouts, src/train/init_from.h), with what the source records
// about its inputs and classes (src/checkpoint/model_info.h; a safetensors file records none).
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "src/checkpoint/checkpoint.h"
#include "src/checkpoint/export.h"
#include "src/model/net.h"

namespace cnn {

struct PredictSource {
  std::string path;
  std::string model;  // --model: the zoo name for a weights export or safetensors; checks a checkpoint's
  ExportWeights weights = ExportWeights::kRaw;  // a checkpoint's (--weights raw|ema|swa)
};

struct PredictModel {
  std::unique_ptr<Net> net;
  ModelInfo info;     // as recorded; num_classes and the input size are the net's
  std::string model;  // the architecture: a zoo name or an ONNX file
};

// `fallback` supplies the input size and class count a source does not record (a dataset's; zero: none). A
// checkpoint is loaded as load_checkpoint_model loads it (src/train/checkpoint_model.h), on `be`.
// Throws Error: exit 2 for a missing or unrecognised source or a --model that does not fit it, 4 for a
// damaged checkpoint or one without the weights asked for.
PredictModel load_predict_model(const PredictSource& src, Backend& be, const ModelInfo& fallback, int max_batch);

}  // namespace cnn
