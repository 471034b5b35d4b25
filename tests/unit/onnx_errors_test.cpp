// What read_onnx makes of files it must refuse (exit 2, naming the file, the node or tensor, and what to do)
// and of the encodings it must accept (every tensor storage PyTorch writes, Constant nodes, external data).
// The files are built with ONNX's own protobuf messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "src/model/onnx/onnx_proto.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using Needles = std::vector<std::string>;

// x [N,2] -> Relu -> y, at `opset`; helpers add initializers and nodes.
onnx::ModelProto relu_model(int64_t opset = 17) {
  onnx::ModelProto p;
  p.set_ir_version(8);
  p.add_opset_import()->set_version(opset);
  auto* g = p.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  g->add_output()->set_name("y");
  auto* n = g->add_node();
  n->set_name("relu1"), n->set_op_type("Relu"), n->add_input("x"), n->add_output("y");
  return p;
}

onnx::NodeProto* add_node(onnx::ModelProto* p, const std::string& name, const std::string& op,
                          std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = p->mutable_graph()->add_node();
  n->set_name(name), n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

onnx::TensorProto* add_init(onnx::ModelProto* p, const std::string& name, std::vector<int64_t> dims, int type) {
  auto* t = p->mutable_graph()->add_initializer();
  t->set_name(name), t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

void set_external(onnx::TensorProto* t, const std::string& location, int64_t offset, int64_t length) {
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k), e->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  if (length >= 0) add("length", std::to_string(length));
}

struct OnnxFiles : ::testing::Test {
  test::TempDir dir;
  std::string write(const onnx::ModelProto& p, const std::string& name = "m.onnx") {
    std::ofstream(dir.file(name), std::ios::binary) << p.SerializeAsString();
    return dir.file(name);
  }
  void write_data(const std::string& name, const std::vector<float>& v) {
    std::ofstream(dir.file(name), std::ios::binary).write(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
};

TEST_F(OnnxFiles, NotOnnxOrTruncated) {
  std::ofstream(dir.file("text.onnx")) << "this is not a model\n";
  test::expect_throws([&] { read_onnx(dir.file("text.onnx")); }, kExitUsage,
                      Needles{"text.onnx", "not an ONNX model, or truncated", "torch.onnx.export"});
  const std::string bytes = relu_model().SerializeAsString();
  std::ofstream(dir.file("cut.onnx"), std::ios::binary) << bytes.substr(0, bytes.size() - 5);
  test::expect_throws([&] { read_onnx(dir.file("cut.onnx")); }, kExitUsage, "cut.onnx: not an ONNX model, or truncated");
  test::expect_throws([&] { read_onnx(dir.file("absent.onnx")); }, kExitUsage, "absent.onnx: no such ONNX file");
  EXPECT_EQ(read_onnx(write(relu_model())).nodes.size(), 1u);
}

TEST_F(OnnxFiles, OpsetsOutside13To20) {
  for (int64_t opset : {12, 21}) {
    test::expect_throws([&] { read_onnx(write(relu_model(opset))); }, kExitUsage,
                        Needles{"m.onnx: opset " + std::to_string(opset) + " is not supported", "opsets 13-20 load",
                         "opset_version=17"});
  }
  for (int64_t opset : {13, 18, 20}) EXPECT_EQ(read_onnx(write(relu_model(opset))).opset, opset);
  onnx::ModelProto p = relu_model();
  p.mutable_opset_import(0)->set_domain("com.example");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, "imports no opset of the default ONNX domain");
}

TEST_F(OnnxFiles, UnknownOpListsTheSupportedOnes) {
  onnx::ModelProto p = relu_model();
  add_node(&p, "up", "Resize", {"y"}, {"z"});
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"m.onnx: node 'up' (Resize): op type not supported", "Supported: Conv, BatchNormalization",
                       "HardSwish", "Identity, Constant"});
  EXPECT_EQ(read_onnx(write(p), {}).nodes.size(), 2u) << "an empty table accepts every op (inspection)";
  p = relu_model();
  p.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, "node 'relu1' (Relu) in domain 'com.microsoft'");
}

TEST_F(OnnxFiles, CycleAndMissingInputsNameTheNode) {
  onnx::ModelProto p = relu_model();
  add_node(&p, "a", "Relu", {"b_out"}, {"a_out"});
  add_node(&p, "b", "Sigmoid", {"a_out"}, {"b_out"});
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, Needles{"node 'a' (Relu)", "cycle"});
  p = relu_model();
  add_node(&p, "fc", "Gemm", {"y", "fc.weight"}, {"z"});
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"node 'fc' (Gemm): input 'fc.weight' is no graph input, initializer or node output"});
  p = relu_model();
  add_node(&p, "", "Relu", {"x"}, {"y"});
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, Needles{"node '#1' (Relu)", "'y' is empty or defined twice"});
  p = relu_model();
  p.mutable_graph()->mutable_output(0)->set_name("nowhere");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, "graph output 'nowhere' is produced by no node");
}

TEST_F(OnnxFiles, NodesComeBackInTopologicalOrder) {
  onnx::ModelProto p = relu_model();
  add_node(&p, "last", "Sigmoid", {"z"}, {"w"});
  add_node(&p, "middle", "Relu", {"y"}, {"z"});
  p.mutable_graph()->mutable_output(0)->set_name("w");
  const OnnxModel m = read_onnx(write(p));
  ASSERT_EQ(m.nodes.size(), 3u);
  EXPECT_EQ(m.nodes[0].name, "relu1");
  EXPECT_EQ(m.nodes[1].name, "middle");
  EXPECT_EQ(m.nodes[2].name, "last");
}

TEST_F(OnnxFiles, UnsupportedAttributeTypes) {
  onnx::ModelProto p = relu_model();
  auto* a = p.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH);
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"node 'relu1' (Relu) attribute 'body'", "type GRAPH are not supported"});
}

TEST_F(OnnxFiles, EveryTensorEncodingLoads) {
  onnx::ModelProto p = relu_model();
  add_init(&p, "f32", {2}, onnx::TensorProto::FLOAT)->set_raw_data(std::string("\0\0\x80\x3f\0\0\0\xc0", 8));
  auto* typed = add_init(&p, "typed", {2}, onnx::TensorProto::FLOAT);
  typed->add_float_data(0.5f), typed->add_float_data(-3.f);
  add_init(&p, "f16", {2}, onnx::TensorProto::FLOAT16)->set_raw_data(std::string("\x00\x3c\x00\xc4", 4));  // 1, -4
  auto* bf = add_init(&p, "bf16", {1}, onnx::TensorProto::BFLOAT16);
  bf->add_int32_data(0x4040);  // 3.0 as a bit pattern in int32_data
  add_init(&p, "f64", {}, onnx::TensorProto::DOUBLE)->add_double_data(6.0);
  add_init(&p, "i64", {2}, onnx::TensorProto::INT64)->set_raw_data(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x05\0\0\0\0\0\0\0", 16));
  add_init(&p, "i32", {1}, onnx::TensorProto::INT32)->add_int32_data(-7);
  auto* c = add_node(&p, "k", "Constant", {}, {"axes"})->add_attribute();
  c->set_name("value_ints"), c->set_type(onnx::AttributeProto::INTS), c->add_ints(2), c->add_ints(3);
  const OnnxModel m = read_onnx(write(p));
  auto floats = [&](const char* n) { return m.find_tensor(n)->floats; };
  EXPECT_EQ(floats("f32"), (std::vector<float>{1.f, -2.f}));
  EXPECT_EQ(floats("typed"), (std::vector<float>{0.5f, -3.f}));
  EXPECT_EQ(floats("f16"), (std::vector<float>{1.f, -4.f}));
  EXPECT_EQ(floats("bf16"), (std::vector<float>{3.f}));
  EXPECT_EQ(floats("f64"), (std::vector<float>{6.f}));
  EXPECT_EQ(m.find_tensor("f16")->source_type, onnx::TensorProto::FLOAT16);
  EXPECT_EQ(m.find_tensor("i64")->ints, (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(m.find_tensor("i32")->ints, (std::vector<int64_t>{-7}));
  EXPECT_EQ(m.find_tensor("axes")->ints, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.constants.size(), 1u);
  EXPECT_EQ(m.nodes.size(), 1u) << "Constant nodes are resolved, not kept as nodes";
  EXPECT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].dims, (std::vector<int64_t>{-1, 2}));
}

TEST_F(OnnxFiles, DamagedTensors) {
  onnx::ModelProto p = relu_model();
  add_init(&p, "w", {2, 3}, onnx::TensorProto::FLOAT)->set_raw_data(std::string(20, '\0'));
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"initializer 'w'", "20 bytes of data for 6 elements of FLOAT"});
  p = relu_model();
  add_init(&p, "s", {1}, onnx::TensorProto::STRING)->add_string_data("x");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, Needles{"initializer 's'", "element type STRING (8)"});
  p = relu_model();
  add_init(&p, "big", {1 << 30, 1 << 30}, onnx::TensorProto::FLOAT);
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, "tensor too large");
  p = relu_model();
  auto* a = add_node(&p, "k", "Constant", {}, {"c"})->add_attribute();
  a->set_name("value_string"), a->set_type(onnx::AttributeProto::STRING), a->set_s("x");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"node 'k' (Constant)", "'value_string' of type STRING is not supported"});
}

TEST_F(OnnxFiles, ExternalDataBesideTheModel) {
  onnx::ModelProto p = relu_model();
  set_external(add_init(&p, "w", {2, 2}, onnx::TensorProto::FLOAT), "m.onnx.data", 8, 16);
  write_data("m.onnx.data", {9, 9, 1, 2, 3, 4});
  EXPECT_EQ(read_onnx(write(p)).find_tensor("w")->floats, (std::vector<float>{1, 2, 3, 4}));
  write_data("m.onnx.data", {9, 9, 1});
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"initializer 'w'", "m.onnx.data' is too short (12 bytes; the tensor needs 16 at offset 8)"});
  ::unlink(dir.file("m.onnx.data").c_str());
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage,
                      Needles{"initializer 'w'", "m.onnx.data' is missing", "copy it along with the model"});
  test::expect_throws([&] { parse_onnx(p.SerializeAsString(), "stored", ""); }, kExitUsage,
                      "where none is allowed");
  p.mutable_graph()->mutable_initializer(0)->mutable_external_data(2)->set_value("12");
  test::expect_throws([&] { read_onnx(write(p)); }, kExitUsage, "length 12");
}

TEST_F(OnnxFiles, ExternalDataMayNotLeaveTheDirectory) {
  write_data("outside.data", {1, 2, 3, 4});
  ::mkdir(dir.file("sub").c_str(), 0755);
  ASSERT_EQ(::symlink(dir.file("outside.data").c_str(), dir.file("sub/link.data").c_str()), 0);
  for (const char* location : {"../outside.data", "/etc/passwd", "link.data", "x/../../outside.data"}) {
    onnx::ModelProto p = relu_model();
    set_external(add_init(&p, "w", {1}, onnx::TensorProto::FLOAT), location, 0, -1);
    test::expect_throws([&] { read_onnx(write(p, "sub/m.onnx")); }, kExitUsage,
                        Needles{"initializer 'w'", "leaves the model's directory"});
  }
  ::mkdir(dir.file("sub/w").c_str(), 0755);
  write_data("sub/w/inside.data", {5});
  onnx::ModelProto p = relu_model();
  set_external(add_init(&p, "w", {1}, onnx::TensorProto::FLOAT), "w/inside.data", 0, -1);
  EXPECT_EQ(read_onnx(write(p, "sub/m.onnx")).find_tensor("w")->floats, (std::vector<float>{5}));
}

TEST_F(OnnxFiles, InitializersListedAsInputsAreNotGraphInputs) {
  onnx::ModelProto p = relu_model();
  add_init(&p, "w", {1}, onnx::TensorProto::FLOAT)->add_float_data(1);
  p.mutable_graph()->add_input()->set_name("w");  // keep_initializers_as_inputs=True
  const OnnxModel m = read_onnx(write(p));
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
}

}  // namespace
}  // namespace cnn
