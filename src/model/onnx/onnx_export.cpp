#include "src/model/onnx/onnx_export.h"

#include "src/base/error.h"

namespace cnn {

OnnxValue Layer::export_onnx(OnnxBuilder&, const std::vector<OnnxValue>&, const OnnxWeights&) const {
  raise(kExitUsage, "layer '%s' (%s) has no ONNX form yet: this model cannot be exported as ONNX (export the "
        "weights as HDF5 instead: cnntrain-data export without --format)", name_.c_str(), describe().c_str());
}

OnnxWeights OnnxWeights::slice(size_t p0, size_t np, size_t b0, size_t nb) const {
  OnnxWeights w;
  w.params.assign(params.begin() + static_cast<std::ptrdiff_t>(p0),
                  params.begin() + static_cast<std::ptrdiff_t>(p0 + np));
  w.buffers.assign(buffers.begin() + static_cast<std::ptrdiff_t>(b0),
                   buffers.begin() + static_cast<std::ptrdiff_t>(b0 + nb));
  return w;
}

OnnxAttr OnnxBuilder::attr(int64_t v) {
  OnnxAttr a;
  a.kind = OnnxAttr::Kind::kInt;
  a.i = v;
  return a;
}

OnnxAttr OnnxBuilder::attr(float v) {
  OnnxAttr a;
  a.kind = OnnxAttr::Kind::kFloat;
  a.f = v;
  return a;
}

OnnxAttr OnnxBuilder::attr(const std::vector<int64_t>& v) {
  OnnxAttr a;
  a.kind = OnnxAttr::Kind::kInts;
  a.ints = v;
  return a;
}

std::string OnnxBuilder::unique(const std::string& name) {
  std::string n = name;
  for (int k = 2; !used_.insert(n).second; ++k) n = name + "_" + std::to_string(k);
  return n;
}

std::string OnnxBuilder::node(const std::string& op, const std::string& out, const std::vector<std::string>& inputs,
                              const std::map<std::string, OnnxAttr>& attrs) {
  OnnxNode n;
  n.op_type = op;
  n.name = unique(prefix_ + out);
  n.inputs = inputs;
  n.outputs = {n.name};
  n.attrs = attrs;
  m_.nodes.push_back(n);
  return n.name;
}

void OnnxBuilder::initializer(const std::string& name, const std::vector<int64_t>& dims, std::vector<float> values) {
  used_.insert(name);
  OnnxTensor t;
  t.name = name;
  t.dims = dims;
  t.floats = std::move(values);
  m_.initializers.push_back(std::move(t));
}

std::string OnnxBuilder::ints(const std::string& name, const std::vector<int64_t>& v) {
  OnnxTensor t;
  t.name = unique(prefix_ + name);
  t.kind = OnnxTensor::Kind::kInt;
  t.source_type = 7;  // int64
  t.dims = {static_cast<int64_t>(v.size())};
  t.ints = v;
  m_.constants.push_back(t);
  return t.name;
}

std::string OnnxBuilder::scalar(const std::string& name, float v) {
  OnnxTensor t;
  t.name = unique(prefix_ + name);
  t.floats = {v};
  m_.constants.push_back(t);
  return t.name;
}

std::string OnnxBuilder::map(const OnnxValue& v, const std::string& out) {
  if (!v.flat) return v.name;
  // Flattened in (c,h,w) order: the reshape back is exact.
  return node("Reshape", out + "/map", {v.name, ints(out + "/shape", {0, v.dims.c, v.dims.h, v.dims.w})});
}

std::string OnnxBuilder::flat(const OnnxValue& v, const std::string& out) {
  if (v.flat) return v.name;
  return node("Flatten", out + "/flat", {v.name}, {{"axis", attr(int64_t{1})}});
}

OnnxModel export_onnx(const Net& net, const float* params, const float* buffers) {
  OnnxModel m;
  m.opset = kOnnxWriteOpset;
  const Dims& in = net.input_dims();
  m.inputs.push_back({"input", 1, {-1, in.c, in.h, in.w}, {"N", "", "", ""}});
  OnnxBuilder b(m);
  std::vector<OnnxValue> outs;
  size_t p = 0, q = 0;  // the next layer's first parameter and buffer in the tables
  const auto& pt = net.param_table();
  const auto& bt = net.buffer_table();
  for (size_t i = 0; i < net.layers().size(); ++i) {
    const Layer& l = *net.layers()[i];
    std::vector<OnnxValue> xs;
    for (int j : net.inputs_of(i)) xs.push_back(j < 0 ? OnnxValue{"input", in, false} : outs[j]);
    OnnxWeights w;
    for (size_t k = 0; k < l.param_specs().size(); ++k, ++p)
      w.params.push_back({pt[p].name, pt[p].shape, params + pt[p].offset});
    for (size_t k = 0; k < l.buffer_specs().size(); ++k, ++q)
      w.buffers.push_back({bt[q].name, bt[q].shape, buffers + bt[q].offset});
    outs.push_back(l.export_onnx(b, xs, w));
  }
  // The logits as [N, classes], under a stable name.
  const std::string last = b.flat(outs.back(), "logits");
  if (!m.nodes.empty() && m.nodes.back().outputs[0] == last) m.nodes.back().outputs[0] = "logits";
  else b.node("Identity", "logits", {last});
  m.outputs.push_back({"logits", 1, {-1, net.num_classes()}, {"N", ""}});
  return m;
}

}  // namespace cnn
