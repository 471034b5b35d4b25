#include "src/model/onnx/onnx_graph_store.h"

#include <algorithm>

#include "src/base/error.h"

namespace cnn {

std::string stored_onnx_graph(const OnnxModel& model, const std::vector<std::string>& weights) {
  OnnxModel m = model;
  m.initializers.clear();
  for (const OnnxTensor& t : model.initializers) {
    if (std::find(weights.begin(), weights.end(), t.name) == weights.end()) {
      m.initializers.push_back(t);
      continue;
    }
    // After the image input: restore_onnx_graph takes every input but the first back.
    m.inputs.push_back({t.name, 1, t.dims, std::vector<std::string>(t.dims.size())});
  }
  return serialize_onnx(m, false);
}

OnnxModel restore_onnx_graph(const std::string& bytes, const std::string& origin) {
  OnnxModel m = parse_onnx(bytes, origin, "");
  if (m.inputs.empty()) raise(kExitUsage, "%s: the stored graph has no input", origin.c_str());
  for (size_t k = 1; k < m.inputs.size(); ++k) {
    OnnxTensor t;
    t.name = m.inputs[k].name;
    t.dims = m.inputs[k].dims;
    if (std::any_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d < 0; }))
      raise(kExitUsage, "%s: weight '%s' of the stored graph has no fixed shape", origin.c_str(), t.name.c_str());
    t.floats.assign(static_cast<size_t>(t.numel()), 0.f);
    m.initializers.push_back(std::move(t));
  }
  m.inputs.resize(1);
  return m;
}

}  // namespace cnn
