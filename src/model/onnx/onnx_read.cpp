// Reading an ONNX ModelProto into an OnnxModel: opset, graph inputs/outputs, initializers (inline or external
// data), Constant nodes resolved, the other nodes checked (known op types, attribute types, every input
// produced, no cycle) and put in topological order.
#include <sys/stat.h>

#include <google/protobuf/io/coded_stream.h>

#include <cstring>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "src/base/error.h"
#include "src/model/onnx/onnx_proto.h"

namespace cnn {

namespace {

using onnx::AttributeProto;

// Protobuf limits for untrusted bytes: the whole file is one message (at most 2 GiB, the format's own limit:
// bigger models keep their weights as external data); graphs nest only through control-flow attributes,
// which no supported op has, so a shallow recursion limit costs nothing.
constexpr int kMaxNesting = 32;
constexpr size_t kMaxFileBytes = (size_t{1} << 31) - 1;

struct Reader {
  std::string origin;
  TensorSource src;
  std::vector<std::string> supported;
  OnnxModel m;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void read_opset(const onnx::ModelProto& p, Reader* r) {
  int64_t opset = -1;
  for (const auto& o : p.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 0)
    raise(kExitUsage, "%s: the model imports no opset of the default ONNX domain (not an ONNX model, or an "
          "empty one); export it with torch.onnx.export", r->origin.c_str());
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset)
    raise(kExitUsage, "%s: opset %lld is not supported (opsets %lld-%lld load): export with opset_version=17 or "
          "convert it with onnx.version_converter", r->origin.c_str(), static_cast<long long>(opset),
          static_cast<long long>(kOnnxMinOpset), static_cast<long long>(kOnnxMaxOpset));
  r->m.opset = opset;
  r->m.ir_version = p.ir_version();
}

OnnxValueInfo value_info(const onnx::ValueInfoProto& v) {
  OnnxValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) {
    out.elem_type = 0;  // a sequence or map: no tensor the graph builder can take
    return out;
  }
  out.elem_type = v.type().tensor_type().elem_type();
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    out.dim_params.push_back(d.dim_param());
  }
  return out;
}

void read_attr(const AttributeProto& a, const Reader& r, OnnxNode* node) {
  OnnxAttr v;
  const std::string where = node->where + " attribute '" + a.name() + "'";
  switch (a.type()) {
    case AttributeProto::INT: v.kind = OnnxAttr::Kind::kInt, v.i = a.i(); break;
    case AttributeProto::FLOAT: v.kind = OnnxAttr::Kind::kFloat, v.f = a.f(); break;
    case AttributeProto::INTS: v.kind = OnnxAttr::Kind::kInts, v.ints.assign(a.ints().begin(), a.ints().end()); break;
    case AttributeProto::FLOATS:
      v.kind = OnnxAttr::Kind::kFloats, v.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case AttributeProto::STRING: v.kind = OnnxAttr::Kind::kString, v.s = a.s(); break;
    case AttributeProto::TENSOR: v.kind = OnnxAttr::Kind::kTensor, v.t = tensor_from_proto(a.t(), r.src, where); break;
    default:
      raise(kExitUsage, "%s: attributes of type %s are not supported (graphs, sparse tensors, lists of strings "
            "or tensors); this op cannot be imported", where.c_str(),
            AttributeProto::AttributeType_Name(a.type()).c_str());
  }
  if (!a.ref_attr_name().empty() || !node->attrs.emplace(a.name(), std::move(v)).second)
    raise(kExitUsage, "%s: appears twice or refers to a function attribute; re-export the model", where.c_str());
}

bool op_supported(const Reader& r, const std::string& op) {
  if (r.supported.empty()) return true;
  for (const auto& s : r.supported)
    if (s == op) return true;
  return false;
}

OnnxNode read_node(const onnx::NodeProto& n, size_t index, const Reader& r) {
  OnnxNode node;
  node.name = n.name().empty() ? "#" + std::to_string(index) : n.name();
  node.op_type = n.op_type();
  node.where = r.origin + ": node '" + node.name + "' (" + n.op_type() + ")";
  const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
  if (!default_domain || !op_supported(r, n.op_type()))
    raise(kExitUsage, "%s%s: op type not supported. Supported: %s. Replace the module that produces it in the "
          "network (docs/models.md, \"Bring your own network\", says what each supported op comes from)", node.where.c_str(),
          default_domain ? "" : (" in domain '" + n.domain() + "'").c_str(),
          r.supported.empty() ? "the default domain's ops" : join(r.supported).c_str());
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  for (const auto& a : n.attribute()) read_attr(a, r, &node);
  return node;
}

// A Constant node's value as a tensor named by its output.
OnnxTensor constant_value(const OnnxNode& n) {
  if (n.outputs.size() != 1 || n.attrs.size() != 1)
    raise_node_error(n, "a Constant needs exactly one output and one value attribute");
  const auto& [key, a] = *n.attrs.begin();
  OnnxTensor t;
  if (key == "value" && a.kind == OnnxAttr::Kind::kTensor) t = a.t;
  else if (key == "value_float" && a.kind == OnnxAttr::Kind::kFloat) t.floats = {a.f};
  else if (key == "value_floats" && a.kind == OnnxAttr::Kind::kFloats) t.floats = a.floats, t.dims = {int64_t(a.floats.size())};
  else if (key == "value_int" && a.kind == OnnxAttr::Kind::kInt) t.kind = OnnxTensor::Kind::kInt, t.ints = {a.i}, t.source_type = 7;
  else if (key == "value_ints" && a.kind == OnnxAttr::Kind::kInts)
    t.kind = OnnxTensor::Kind::kInt, t.ints = a.ints, t.dims = {int64_t(a.ints.size())}, t.source_type = 7;
  else raise_node_error(n, "value attribute '%s' of type %s is not supported (tensors, floats and ints are)",
                        key.c_str(), onnx_attr_kind_name(a.kind));
  t.name = n.outputs[0];
  return t;
}

[[noreturn]] void raise_bad_name(const std::string& where, const std::string& name) {
  raise(kExitUsage, "%s: the value name '%s' is empty or defined twice (initializer, graph input or node "
        "output); the file is not a valid ONNX graph: re-export it", where.c_str(), name.c_str());
}

void add_defined(std::set<std::string>* defined, const std::string& name, const std::string& where) {
  if (name.empty() || !defined->insert(name).second) raise_bad_name(where, name);
}

// Kahn's algorithm, taking nodes in file order where the order is free; any node left over is on a cycle
// (or waits for one).
void sort_nodes(std::vector<OnnxNode> nodes, std::set<std::string> defined, Reader* r) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs) {
      if (o.empty()) continue;
      if (defined.count(o) || !producer.emplace(o, i).second) raise_bad_name(nodes[i].where, o);
    }
  std::vector<int> waiting(nodes.size(), 0);
  std::map<std::string, std::vector<size_t>> consumers;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : nodes[i].inputs) {
      if (in.empty() || defined.count(in)) continue;
      if (!producer.count(in))
        raise(kExitUsage, "%s: input '%s' is no graph input, initializer or node output; the file is incomplete "
              "(an initializer or an external-data tensor is missing): re-export the model", nodes[i].where.c_str(),
              in.c_str());
      ++waiting[i];
      consumers[in].push_back(i);
    }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<bool> done(nodes.size(), false);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    done[i] = true;
    for (const auto& o : nodes[i].outputs)
      for (size_t c : consumers[o])
        if (--waiting[c] == 0) ready.push(c);
    r->m.nodes.push_back(std::move(nodes[i]));
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!done[i])
      raise(kExitUsage, "%s: the graph has a cycle through this node (an ONNX graph must be acyclic); the file "
            "is damaged or was not written by an exporter", nodes[i].where.c_str());
}

void read_graph(const onnx::GraphProto& g, Reader* r) {
  std::set<std::string> defined;
  r->m.graph_name = g.name();
  for (const auto& t : g.initializer()) {
    r->m.initializers.push_back(tensor_from_proto(t, r->src, r->origin + ": initializer '" + t.name() + "'"));
    add_defined(&defined, t.name(), r->origin + ": initializer");
  }
  if (g.sparse_initializer_size() > 0)
    raise(kExitUsage, "%s: sparse initializers are not supported; export dense weights", r->origin.c_str());
  for (const auto& v : g.input()) {
    if (defined.count(v.name())) continue;  // initializers listed as inputs too (keep_initializers_as_inputs)
    add_defined(&defined, v.name(), r->origin + ": graph input");
    r->m.inputs.push_back(value_info(v));
  }
  std::vector<OnnxNode> nodes;
  for (int i = 0; i < g.node_size(); ++i) {
    OnnxNode n = read_node(g.node(i), static_cast<size_t>(i), *r);
    if (n.op_type != "Constant") {
      nodes.push_back(std::move(n));
      continue;
    }
    r->m.constants.push_back(constant_value(n));
    add_defined(&defined, n.outputs[0], n.where);
  }
  sort_nodes(std::move(nodes), defined, r);
  std::set<std::string> available = defined;
  for (const auto& n : r->m.nodes) available.insert(n.outputs.begin(), n.outputs.end());
  for (const auto& v : g.output()) {
    if (!available.count(v.name()))
      raise(kExitUsage, "%s: graph output '%s' is produced by no node; re-export the model", r->origin.c_str(),
            v.name().c_str());
    r->m.outputs.push_back(value_info(v));
  }
  if (r->m.outputs.empty()) raise(kExitUsage, "%s: the graph has no output; re-export the model", r->origin.c_str());
}

}  // namespace

OnnxModel parse_onnx(const std::string& bytes, const std::string& origin, const std::string& base_dir,
                     const std::vector<std::string>& supported_ops) {
  if (bytes.size() >= kMaxFileBytes)
    raise(kExitUsage, "%s: %zu bytes; an ONNX file holds at most 2 GiB: export with the weights as external data",
          origin.c_str(), bytes.size());
  onnx::ModelProto proto;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(bytes.size()));
  in.SetRecursionLimit(kMaxNesting);
  if (bytes.empty() || !proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage() || !proto.has_graph())
    raise(kExitUsage, "%s: not an ONNX model, or truncated (%zu bytes that protobuf cannot read as an ONNX "
          "ModelProto with a graph); export it again with torch.onnx.export", origin.c_str(), bytes.size());
  Reader r{origin, TensorSource{origin, base_dir}, supported_ops, OnnxModel{}};
  r.m.path = origin;
  read_opset(proto, &r);
  r.m.producer_name = proto.producer_name();
  r.m.producer_version = proto.producer_version();
  for (const auto& kv : proto.metadata_props()) r.m.metadata[kv.key()] = kv.value();
  read_graph(proto.graph(), &r);
  return std::move(r.m);
}

OnnxModel read_onnx(const std::string& path, const std::vector<std::string>& supported_ops) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    raise(kExitUsage, "%s: no such ONNX file (%s)", path.c_str(), std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) >= kMaxFileBytes)
    raise(kExitUsage, "%s: %lld bytes; an ONNX file holds at most 2 GiB: export with the weights as external data",
          path.c_str(), static_cast<long long>(st.st_size));
  std::ifstream f(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (!f.read(&bytes[0], st.st_size)) raise(kExitUsage, "%s: cannot read the file", path.c_str());
  const size_t slash = path.rfind('/');
  return parse_onnx(bytes, path, slash == std::string::npos ? "." : path.substr(0, slash), supported_ops);
}

}  // namespace cnn
