// OnnxModel lookups, the supported-op table, attribute access with errors that name the node, and the
// description `cnntrain-data onnx-info` prints.
#include <cstdarg>
#include <map>

#include "src/base/error.h"
#include "src/model/onnx/onnx_model.h"

namespace cnn {

int64_t OnnxTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const OnnxTensor* OnnxModel::find_tensor(const std::string& name) const {
  for (const auto* list : {&initializers, &constants})
    for (const auto& t : *list)
      if (t.name == name) return &t;
  return nullptr;
}

int64_t OnnxModel::float_initializer_elements() const {
  int64_t n = 0;
  for (const auto& t : initializers)
    if (t.is_float()) n += t.numel();
  return n;
}

const std::vector<std::string>& onnx_supported_ops() {
  static const std::vector<std::string> ops = {
      "Conv", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
      "Add", "Mul", "Concat", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean", "Flatten",
      "Reshape", "Gemm", "MatMul", "Dropout", "Identity", "Constant",
      // Of a constant only (the TorchScript exporter casts ReLU6's Clip bounds when it does not fold constants).
      "Cast"};
  return ops;
}

const char* onnx_attr_kind_name(OnnxAttr::Kind kind) {
  switch (kind) {
    case OnnxAttr::Kind::kInt: return "INT";
    case OnnxAttr::Kind::kFloat: return "FLOAT";
    case OnnxAttr::Kind::kInts: return "INTS";
    case OnnxAttr::Kind::kFloats: return "FLOATS";
    case OnnxAttr::Kind::kString: return "STRING";
    default: return "TENSOR";
  }
}

void raise_node_error(const OnnxNode& node, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  raise(kExitUsage, "%s: %s", node.where.c_str(), msg.c_str());
}

namespace {

// The attribute `name` when present with type `kind`; nullptr when absent; exit 2 when of another type.
const OnnxAttr* find_attr(const OnnxNode& node, const std::string& name, OnnxAttr::Kind kind) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return nullptr;
  if (it->second.kind != kind)
    raise_node_error(node, "attribute '%s' is %s, expected %s; the file does not follow the ONNX operator "
                     "specification", name.c_str(), onnx_attr_kind_name(it->second.kind), onnx_attr_kind_name(kind));
  return &it->second;
}

}  // namespace

bool has_attr(const OnnxNode& node, const std::string& name) { return node.attrs.count(name) > 0; }

int64_t attr_int(const OnnxNode& node, const std::string& name, int64_t def) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kInt);
  return a ? a->i : def;
}

float attr_float(const OnnxNode& node, const std::string& name, float def) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kFloat);
  return a ? a->f : def;
}

std::string attr_string(const OnnxNode& node, const std::string& name, const std::string& def) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kString);
  return a ? a->s : def;
}

std::vector<int64_t> attr_ints(const OnnxNode& node, const std::string& name, const std::vector<int64_t>& def) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kInts);
  return a ? a->ints : def;
}

std::vector<int64_t> attr_ints_required(const OnnxNode& node, const std::string& name) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kInts);
  if (!a) raise_node_error(node, "attribute '%s' (INTS) is required; re-export the model", name.c_str());
  return a->ints;
}

std::vector<float> attr_floats(const OnnxNode& node, const std::string& name, const std::vector<float>& def) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kFloats);
  return a ? a->floats : def;
}

const OnnxTensor& attr_tensor_required(const OnnxNode& node, const std::string& name) {
  const OnnxAttr* a = find_attr(node, name, OnnxAttr::Kind::kTensor);
  if (!a) raise_node_error(node, "attribute '%s' (TENSOR) is required; re-export the model", name.c_str());
  return a->t;
}

void check_attrs_known(const OnnxNode& node, const std::vector<std::string>& known) {
  for (const auto& kv : node.attrs) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == kv.first;
    if (ok) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    raise_node_error(node, "attribute '%s' is not supported (cnntrain understands: %s)", kv.first.c_str(),
                     list.empty() ? "none" : list.c_str());
  }
}

namespace {

std::string shape_string(const OnnxValueInfo& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i) s += ",";
    s += v.dims[i] >= 0 ? std::to_string(v.dims[i]) : (v.dim_params[i].empty() ? "?" : v.dim_params[i]);
  }
  return s + "]";
}

}  // namespace

std::string describe_onnx(const OnnxModel& m) {
  std::string s = strprintf("%s: opset %lld, IR version %lld, producer %s %s\n", m.path.c_str(),
                            static_cast<long long>(m.opset), static_cast<long long>(m.ir_version),
                            m.producer_name.empty() ? "(none)" : m.producer_name.c_str(), m.producer_version.c_str());
  for (const auto& v : m.inputs) s += "input  " + v.name + " " + shape_string(v) + "\n";
  for (const auto& v : m.outputs) s += "output " + v.name + " " + shape_string(v) + "\n";
  std::map<std::string, int> by_op;
  for (const auto& n : m.nodes) ++by_op[n.op_type];
  s += strprintf("nodes: %zu (+%zu Constant)", m.nodes.size(), m.constants.size());
  for (const auto& kv : by_op) s += strprintf(" %s %d", kv.first.c_str(), kv.second);
  const int64_t params = m.float_initializer_elements();
  s += strprintf("\nparameters: %lld in %zu initializers\n", static_cast<long long>(params), m.initializers.size());
  for (const auto& kv : m.metadata) s += "metadata " + kv.first + " = " + kv.second + "\n";
  return s;
}

}  // namespace cnn
