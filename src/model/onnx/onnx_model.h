// The ONNX file layer: a model file read into plain C++ (no protobuf types here) and written back. The graph
// builder (import), export and `cnntrain-data onnx-info` build on it; it knows nothing of layers or kernels.
// Parsing uses the ONNX project's own protobuf messages (Debian's libonnx-dev); writing runs its checker.
// Every problem with a file is a cnn::Error with exit 2 naming the file, the node (name and op type) or tensor,
// and what to do (docs/models.md, "Bring your own network").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnn {

// A tensor from an initializer, a Constant node or a tensor attribute. Floating types (float32, float16,
// bfloat16, double) are converted to float32 in `floats`; integer and bool types to int64 in `ints` (shapes,
// axes, clip bounds stored as integers). `dims` empty = a scalar (one element).
struct OnnxTensor {
  enum class Kind { kFloat, kInt };
  std::string name;
  std::vector<int64_t> dims;
  Kind kind = Kind::kFloat;
  int source_type = 1;  // the file's TensorProto.DataType (1 float, 10 float16, 16 bfloat16, 7 int64, ...)
  std::vector<float> floats;
  std::vector<int64_t> ints;

  int64_t numel() const;
  bool is_float() const { return kind == Kind::kFloat; }
};

struct OnnxAttr {
  enum class Kind { kInt, kFloat, kInts, kFloats, kString, kTensor };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
  OnnxTensor t;
};
const char* onnx_attr_kind_name(OnnxAttr::Kind kind);

struct OnnxNode {
  std::string name;     // may be empty in the file; then "#<index>" of the node in the file
  std::string op_type;
  std::vector<std::string> inputs;   // "" = an optional input left out
  std::vector<std::string> outputs;
  std::map<std::string, OnnxAttr> attrs;
  std::string where;    // "FILE: node 'NAME' (OP)", the prefix of every message about this node
};

// A graph input or output. dims[i] < 0: dynamic (dim_params[i] names it when the file did, e.g. "N").
struct OnnxValueInfo {
  std::string name;
  int elem_type = 1;  // TensorProto.DataType
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;
};

struct OnnxModel {
  std::string path;             // the file it was read from (for messages); empty for a model built in memory
  int64_t opset = 17;           // of the default domain
  int64_t ir_version = 0;       // as read; write_onnx writes the one that matches `opset`
  std::string producer_name, producer_version, graph_name;
  std::vector<OnnxValueInfo> inputs;   // graph inputs that are not initializers
  std::vector<OnnxValueInfo> outputs;
  std::vector<OnnxNode> nodes;         // topological order; Constant nodes are in `constants`, not here
  std::vector<OnnxTensor> initializers;
  std::vector<OnnxTensor> constants;   // the values of the Constant nodes, named by their outputs
  std::map<std::string, std::string> metadata;  // metadata_props

  // An initializer or constant by name; nullptr if there is none.
  const OnnxTensor* find_tensor(const std::string& name) const;
  // Elements of all floating-point initializers (the parameter count `onnx-info` prints).
  int64_t float_initializer_elements() const;
};

// The opsets of the default domain that load (what PyTorch's exporters write: 13..20).
constexpr int64_t kOnnxMinOpset = 13, kOnnxMaxOpset = 20;
// The opset write_onnx writes by default, and the newest that Debian's ONNX 1.12 checker knows.
constexpr int64_t kOnnxWriteOpset = 17;

// The op types cnntrain can build a network from (default domain). The graph builder shares this table; a
// file with any other op is refused by read_onnx, the message listing these.
const std::vector<std::string>& onnx_supported_ops();

// Reads FILE.onnx and the external data it names (relative to its directory). `supported_ops` is the set of
// op types the caller can build; empty = accept every op type (for inspection tools).
OnnxModel read_onnx(const std::string& path, const std::vector<std::string>& supported_ops = onnx_supported_ops());
// The same for bytes already in memory (a checkpoint's stored graph, the fuzzer); `origin` names them in
// messages; external data is looked up in `base_dir` ("" = none allowed).
OnnxModel parse_onnx(const std::string& bytes, const std::string& origin, const std::string& base_dir,
                     const std::vector<std::string>& supported_ops = onnx_supported_ops());

// Writes `model` as a self-contained ONNX file (opset model.opset, 13..17; weights inline as float32/int64;
// dynamic dims as dim_param, "N" for an unnamed batch dim), after checking it with ONNX's checker. Writes
// PATH.tmp and renames it over PATH.
void write_onnx(const OnnxModel& model, const std::string& path);
// The same bytes, for storing the graph elsewhere (a checkpoint). Without `check`: any opset read_onnx loads and
// no checker (a graph read from a file, stored to be parsed back by parse_onnx).
std::string serialize_onnx(const OnnxModel& model, bool check = true);

// What `cnntrain-data onnx-info` prints: opset, producer, inputs, outputs, nodes by op type, parameters.
std::string describe_onnx(const OnnxModel& model);

// Attribute access for the graph builder: the value, `def` when absent, exit 2 naming the node when the
// attribute has another type. The *_required forms fail when it is absent.
bool has_attr(const OnnxNode& node, const std::string& name);
int64_t attr_int(const OnnxNode& node, const std::string& name, int64_t def);
float attr_float(const OnnxNode& node, const std::string& name, float def);
std::string attr_string(const OnnxNode& node, const std::string& name, const std::string& def);
std::vector<int64_t> attr_ints(const OnnxNode& node, const std::string& name, const std::vector<int64_t>& def);
std::vector<int64_t> attr_ints_required(const OnnxNode& node, const std::string& name);
std::vector<float> attr_floats(const OnnxNode& node, const std::string& name, const std::vector<float>& def);
const OnnxTensor& attr_tensor_required(const OnnxNode& node, const std::string& name);
// Refuses any attribute not in `known` (exit 2, listing the node's attributes that cnntrain understands).
void check_attrs_known(const OnnxNode& node, const std::vector<std::string>& known);
// Exit 2 with "WHERE: MESSAGE" for a node.
[[noreturn]] void raise_node_error(const OnnxNode& node, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace cnn
