// The ONNX file layer (src/model/onnx): write_onnx -> read_onnx round trips, the attribute helpers the graph
// builder uses, and onnx-info's description. Refusals of bad files: onnx_errors_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "src/model/onnx/onnx_model.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using Needles = std::vector<std::string>;

OnnxTensor float_tensor(const std::string& name, std::vector<int64_t> dims, float scale) {
  OnnxTensor t;
  t.name = name;
  t.dims = dims;
  for (int64_t i = 0; i < t.numel(); ++i) t.floats.push_back(scale * static_cast<float>(i) - 1.5f);
  return t;
}

OnnxAttr ints_attr(std::vector<int64_t> v) {
  OnnxAttr a;
  a.kind = OnnxAttr::Kind::kInts;
  a.ints = v;
  return a;
}

OnnxNode node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  OnnxNode n;
  n.name = out[0] + "_node";
  n.op_type = op;
  n.inputs = in;
  n.outputs = out;
  n.where = "test.onnx: node '" + n.name + "' (" + op + ")";
  return n;
}

// conv -> bn -> relu6 (Clip with constant bounds) -> global pool -> reshape [N,-1] -> gemm.
OnnxModel small_model() {
  OnnxModel m;
  m.producer_name = "cnntrain";
  m.producer_version = "test";
  m.inputs.push_back({"images", 1, {-1, 3, 8, 8}, {"", "", "", ""}});
  m.outputs.push_back({"logits", 1, {-1, 10}, {"N", ""}});
  m.initializers = {float_tensor("conv1.weight", {4, 3, 3, 3}, 0.01f), float_tensor("bn1.weight", {4}, 0.5f),
                    float_tensor("bn1.bias", {4}, 0.25f), float_tensor("bn1.running_mean", {4}, 0.1f),
                    float_tensor("bn1.running_var", {4}, 0.2f), float_tensor("fc.weight", {10, 4}, 0.03f),
                    float_tensor("fc.bias", {10}, 0.07f)};
  OnnxTensor shape;
  shape.name = "flat_shape";
  shape.kind = OnnxTensor::Kind::kInt;
  shape.source_type = 7;
  shape.dims = {2};
  shape.ints = {0, -1};
  m.constants = {float_tensor("lo", {}, 0), float_tensor("hi", {}, 0), shape};
  m.constants[0].floats = {0.f};
  m.constants[1].floats = {6.f};
  OnnxNode conv = node("Conv", {"images", "conv1.weight"}, {"c1"});
  conv.attrs["pads"] = ints_attr({1, 1, 1, 1});
  conv.attrs["kernel_shape"] = ints_attr({3, 3});
  conv.attrs["group"].i = 1;
  OnnxNode bn = node("BatchNormalization", {"c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"},
                     {"b1"});
  bn.attrs["epsilon"].kind = OnnxAttr::Kind::kFloat;
  bn.attrs["epsilon"].f = 1e-5f;
  OnnxNode gemm = node("Gemm", {"flat", "fc.weight", "fc.bias"}, {"logits"});
  gemm.attrs["transB"].i = 1;
  m.nodes = {conv, bn, node("Clip", {"b1", "lo", "hi"}, {"r1"}), node("GlobalAveragePool", {"r1"}, {"gap"}),
             node("Reshape", {"gap", "flat_shape"}, {"flat"}), gemm};
  m.metadata = {{"mean", "72.9"}, {"std", "90.0"}, {"class_names", "a,b"}};
  return m;
}

void expect_same_tensors(const std::vector<OnnxTensor>& a, const std::vector<OnnxTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].dims, b[i].dims) << a[i].name;
    EXPECT_EQ(a[i].kind, b[i].kind) << a[i].name;
    EXPECT_EQ(a[i].floats, b[i].floats) << a[i].name;
    EXPECT_EQ(a[i].ints, b[i].ints) << a[i].name;
  }
}

TEST(OnnxIo, WriteThenReadGivesTheSameModel) {
  test::TempDir dir;
  const OnnxModel m = small_model();
  write_onnx(m, dir.file("m.onnx"));
  const OnnxModel r = read_onnx(dir.file("m.onnx"));
  EXPECT_EQ(r.opset, 17);
  EXPECT_EQ(r.ir_version, 8);
  EXPECT_EQ(r.producer_name, "cnntrain");
  EXPECT_EQ(r.metadata, m.metadata);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].dims, m.inputs[0].dims);
  EXPECT_EQ(r.inputs[0].dim_params[0], "N") << "the dynamic batch dim is written as dim_param N";
  EXPECT_EQ(r.outputs[0].dims, m.outputs[0].dims);
  expect_same_tensors(r.initializers, m.initializers);
  expect_same_tensors(r.constants, m.constants);
  ASSERT_EQ(r.nodes.size(), m.nodes.size());
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    EXPECT_EQ(r.nodes[i].op_type, m.nodes[i].op_type);
    EXPECT_EQ(r.nodes[i].name, m.nodes[i].name);
    EXPECT_EQ(r.nodes[i].inputs, m.nodes[i].inputs);
    EXPECT_EQ(r.nodes[i].outputs, m.nodes[i].outputs);
    EXPECT_EQ(r.nodes[i].attrs.size(), m.nodes[i].attrs.size()) << m.nodes[i].name;
  }
  EXPECT_EQ(attr_ints(r.nodes[0], "pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_FLOAT_EQ(attr_float(r.nodes[1], "epsilon", 0), 1e-5f);
  EXPECT_EQ(attr_int(r.nodes[5], "transB", 0), 1);
  // The same bytes in memory (how a checkpoint stores the graph) parse to the same model.
  const OnnxModel s = parse_onnx(serialize_onnx(m), "stored graph", "");
  EXPECT_EQ(s.nodes.size(), m.nodes.size());
  expect_same_tensors(s.initializers, m.initializers);
}

TEST(OnnxIo, WriterRefusesWhatTheOnnxCheckerRefuses) {
  test::TempDir dir;
  OnnxModel m = small_model();
  m.nodes[2].op_type = "NoSuchOp";
  test::expect_throws([&] { write_onnx(m, dir.file("bad.onnx")); }, kExitFailure,
                      Needles{"invalid", "NoSuchOp"});
  m = small_model();
  m.opset = 20;
  test::expect_throws([&] { write_onnx(m, dir.file("bad.onnx")); }, kExitFailure, "opsets 13-17");
  std::ifstream f(dir.file("bad.onnx"));
  EXPECT_FALSE(f.good()) << "nothing may be written when the check fails";
}

TEST(OnnxIo, AttributeHelpersNameTheNodeOnAWrongType) {
  OnnxModel m = small_model();
  const OnnxNode& conv = m.nodes[0];
  EXPECT_EQ(attr_int(conv, "group", 7), 1);
  EXPECT_EQ(attr_int(conv, "absent", 7), 7);
  EXPECT_EQ(attr_string(conv, "auto_pad", "NOTSET"), "NOTSET");
  EXPECT_TRUE(has_attr(conv, "pads"));
  EXPECT_EQ(attr_ints_required(conv, "kernel_shape"), (std::vector<int64_t>{3, 3}));
  test::expect_throws([&] { attr_float(conv, "group", 0); }, kExitUsage,
                      Needles{"test.onnx: node 'c1_node' (Conv)", "'group' is INT, expected FLOAT"});
  test::expect_throws([&] { attr_ints_required(conv, "strides"); }, kExitUsage, Needles{"(Conv)", "'strides' (INTS) is required"});
  test::expect_throws([&] { attr_tensor_required(conv, "value"); }, kExitUsage, "'value' (TENSOR) is required");
  test::expect_throws([&] { check_attrs_known(conv, {"pads", "group"}); }, kExitUsage,
                      Needles{"(Conv)", "attribute 'kernel_shape' is not supported", "understands: pads, group"});
  check_attrs_known(conv, {"pads", "group", "kernel_shape", "strides"});
}

TEST(OnnxIo, DescribeListsInputsOpsAndParameters) {
  test::TempDir dir;
  write_onnx(small_model(), dir.file("m.onnx"));
  const std::string s = describe_onnx(read_onnx(dir.file("m.onnx")));
  for (const char* want : {"opset 17", "input  images [N,3,8,8]", "output logits [N,10]",
                           "nodes: 6 (+3 Constant)", "Conv 1", "Gemm 1", "parameters: 174 ", "metadata mean = 72.9"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing '" << want << "' in:\n" << s;
}

// The issue's 22 operators, and Cast (of constants: the TorchScript exporter casts ReLU6's bounds).
TEST(OnnxIo, SupportedOpTableIsTheIssuesList) {
  const auto& ops = onnx_supported_ops();
  EXPECT_EQ(ops.size(), 23u);
  for (const char* op : {"Conv", "HardSwish", "ReduceMean", "MatMul", "Constant", "Identity", "Cast"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
}

}  // namespace
}  // namespace cnn
