// Writing an OnnxModel as a ModelProto (what `cnntrain-data export --format onnx` writes). Before anything
// reaches the disk, ONNX's own checker (Debian's libonnx 1.12) must accept the model: an exporter bug then
// stops the export instead of producing a file other tools refuse. Not its shape inference: 1.12's reads out
// of bounds on a Conv whose input has fewer dims than its pads (found by tests/onnx/fuzz_onnx.cpp); the tests
// run the current onnx package's full check (with shape inference) on what this writes instead.
// onnx_proto.h first: it sets the macros (ONNX_ML, ONNX_NAMESPACE) every ONNX header needs.
#include "src/model/onnx/onnx_proto.h"

#include <onnx/checker.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "src/base/error.h"

namespace cnn {

namespace {

// The IR version each opset came with (onnx/helper.py VERSION_TABLE): 13-14 -> 7, 15-17 -> 8.
int64_t ir_version_of(int64_t opset) { return opset <= 14 ? 7 : 8; }

void value_info_to_proto(const OnnxValueInfo& v, onnx::ValueInfoProto* out) {
  out->set_name(v.name);
  auto* tt = out->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.elem_type);
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < v.dims.size(); ++i) {
    auto* d = shape->add_dim();
    const std::string param = i < v.dim_params.size() ? v.dim_params[i] : "";
    if (v.dims[i] >= 0) d->set_dim_value(v.dims[i]);
    else if (!param.empty()) d->set_dim_param(param);
    else if (i == 0) d->set_dim_param("N");  // the batch: dynamic, named as PyTorch's dynamic_axes do
  }
}

void attr_to_proto(const std::string& name, const OnnxAttr& a, onnx::AttributeProto* out) {
  using onnx::AttributeProto;
  out->set_name(name);
  switch (a.kind) {
    case OnnxAttr::Kind::kInt: out->set_type(AttributeProto::INT), out->set_i(a.i); break;
    case OnnxAttr::Kind::kFloat: out->set_type(AttributeProto::FLOAT), out->set_f(a.f); break;
    case OnnxAttr::Kind::kInts:
      out->set_type(AttributeProto::INTS);
      for (int64_t v : a.ints) out->add_ints(v);
      break;
    case OnnxAttr::Kind::kFloats:
      out->set_type(AttributeProto::FLOATS);
      for (float v : a.floats) out->add_floats(v);
      break;
    case OnnxAttr::Kind::kString: out->set_type(AttributeProto::STRING), out->set_s(a.s); break;
    case OnnxAttr::Kind::kTensor: out->set_type(AttributeProto::TENSOR), tensor_to_proto(a.t, out->mutable_t()); break;
  }
}

void node_to_proto(const OnnxNode& n, onnx::NodeProto* out) {
  out->set_name(n.name);
  out->set_op_type(n.op_type);
  for (const auto& in : n.inputs) out->add_input(in);
  for (const auto& o : n.outputs) out->add_output(o);
  for (const auto& kv : n.attrs) attr_to_proto(kv.first, kv.second, out->add_attribute());
}

onnx::ModelProto to_proto(const OnnxModel& m, int64_t max_opset) {
  if (m.opset < kOnnxMinOpset || m.opset > max_opset)
    raise(kExitFailure, "write_onnx: opset %lld requested; ONNX files are written with opsets %lld-%lld (what "
          "the ONNX checker here validates)", static_cast<long long>(m.opset),
          static_cast<long long>(kOnnxMinOpset), static_cast<long long>(max_opset));
  onnx::ModelProto p;
  p.set_ir_version(ir_version_of(m.opset));
  p.set_producer_name(m.producer_name.empty() ? "cnntrain" : m.producer_name);
  p.set_producer_version(m.producer_version);
  auto* opset = p.add_opset_import();
  opset->set_domain("");
  opset->set_version(m.opset);
  for (const auto& kv : m.metadata) {
    auto* e = p.add_metadata_props();
    e->set_key(kv.first);
    e->set_value(kv.second);
  }
  auto* g = p.mutable_graph();
  g->set_name(m.graph_name.empty() ? "cnntrain" : m.graph_name);
  for (const auto& t : m.initializers) tensor_to_proto(t, g->add_initializer());
  for (const auto& v : m.inputs) value_info_to_proto(v, g->add_input());
  for (const auto& v : m.outputs) value_info_to_proto(v, g->add_output());
  // Constants first, as Constant nodes: a file read back has them where they were.
  for (const auto& t : m.constants) {
    auto* n = g->add_node();
    n->set_name(t.name);
    n->set_op_type("Constant");
    n->add_output(t.name);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    tensor_to_proto(t, a->mutable_t());
  }
  for (const auto& n : m.nodes) node_to_proto(n, g->add_node());
  return p;
}

void validate(const onnx::ModelProto& p, const std::string& what) {
  try {
    onnx::checker::check_model(p);
  } catch (const std::exception& e) {
    raise(kExitFailure, "%s: the ONNX model built for export is invalid (an exporter bug; please report it): %s",
          what.c_str(), e.what());
  }
}

}  // namespace

std::string serialize_onnx(const OnnxModel& model, bool check) {
  const onnx::ModelProto p = to_proto(model, check ? kOnnxWriteOpset : kOnnxMaxOpset);
  if (check) validate(p, model.path.empty() ? "write_onnx" : model.path);
  if (p.ByteSizeLong() >= (size_t{1} << 31) - 1)
    raise(kExitFailure, "write_onnx: the model needs %zu bytes; an ONNX file without external data holds at "
          "most 2 GiB", p.ByteSizeLong());
  return p.SerializeAsString();
}

void write_onnx(const OnnxModel& model, const std::string& path) {
  const std::string bytes = serialize_onnx(model);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) raise(kExitFailure, "%s: cannot write (%s); check the directory and free space", tmp.c_str(),
                  std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    raise(kExitFailure, "cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(errno));
}

}  // namespace cnn
