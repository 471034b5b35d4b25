// ONNX export pieces that the end-to-end parity (tests/onnx/export_parity.py) does not reach: an imported
// graph as checkpoints store it (src/model/onnx/onnx_graph_store.h) and the refusal of a layer without an ONNX
// form.
#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "src/base/error.h"
#include "src/model/onnx/onnx_export.h"
#include "src/model/onnx/onnx_graph_store.h"

namespace cnn {
namespace {

OnnxTensor tensor(const std::string& name, std::vector<int64_t> dims, float first) {
  OnnxTensor t;
  t.name = name;
  t.dims = dims;
  for (int64_t i = 0; i < t.numel(); ++i) t.floats.push_back(first + static_cast<float>(i));
  return t;
}

// x [N,1,4,4] -> Conv(W, B) -> Clip(lo, hi) -> y: two weights, two constant bounds.
OnnxModel conv_clip(int64_t k) {
  OnnxModel m;
  m.inputs.push_back({"x", 1, {-1, 1, 4, 4}, {"N", "", "", ""}});
  m.outputs.push_back({"y", 1, {-1, k, 2, 2}, {"N", "", "", ""}});
  m.initializers = {tensor("W", {k, 1, 3, 3}, 0.5f), tensor("B", {k}, 1.f), tensor("lo", {}, -1.f),
                    tensor("hi", {}, 6.f)};
  OnnxNode conv, clip;
  conv.name = "conv", conv.op_type = "Conv", conv.inputs = {"x", "W", "B"}, conv.outputs = {"c"};
  clip.name = "clip", clip.op_type = "Clip", clip.inputs = {"c", "lo", "hi"}, clip.outputs = {"y"};
  m.nodes = {conv, clip};
  return m;
}

TEST(OnnxGraphStore, WeightsLeaveTheStoredGraphConstantsStay) {
  const std::string bytes = stored_onnx_graph(conv_clip(2), {"W", "B"});
  EXPECT_EQ(bytes, stored_onnx_graph(conv_clip(2), {"W", "B"})) << "the same file must store the same bytes";
  EXPECT_NE(bytes, stored_onnx_graph(conv_clip(3), {"W", "B"})) << "another weight shape is another graph";
  OnnxModel other = conv_clip(2);
  other.initializers[0].floats.assign(other.initializers[0].floats.size(), 7.f);
  EXPECT_EQ(bytes, stored_onnx_graph(other, {"W", "B"})) << "other weight values are the same graph";

  const OnnxModel back = restore_onnx_graph(bytes, "ckpt.h5");
  ASSERT_EQ(back.inputs.size(), 1u);
  EXPECT_EQ(back.inputs[0].name, "x");
  ASSERT_EQ(back.nodes.size(), 2u);
  EXPECT_EQ(back.nodes[0].op_type, "Conv");
  const OnnxTensor* w = back.find_tensor("W");
  const OnnxTensor* lo = back.find_tensor("lo");
  const OnnxTensor* hi = back.find_tensor("hi");
  ASSERT_TRUE(w && lo && hi && back.find_tensor("B"));
  EXPECT_EQ(w->dims, (std::vector<int64_t>{2, 1, 3, 3}));
  EXPECT_EQ(w->floats, std::vector<float>(18, 0.f)) << "the checkpoint supplies the weights";
  EXPECT_EQ(lo->floats, std::vector<float>{-1.f}) << "a constant that is no weight keeps its value";
  EXPECT_EQ(hi->floats, std::vector<float>{6.f});
}

TEST(OnnxGraphStore, BytesThatAreNoGraphExit2) {
  try {
    restore_onnx_graph("not a model", "ckpt.h5 (stored graph)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("ckpt.h5 (stored graph)"), std::string::npos) << e.what();
  }
}

// A layer that never learned its ONNX form.
class NoOnnx : public Layer {
 public:
  using Layer::Layer;
  std::string describe() const override { return "no-onnx"; }
  Dims setup(const Dims& in) override { return in; }
  void forward(Backend&, const void*, void*, int, bool) override {}
  void backward(Backend&, const void*, const void*, const void*, void*, int) override {}
};

TEST(OnnxExport, ALayerWithoutAnOnnxFormIsNamed) {
  auto be = make_cpu_backend(1);
  Net net(*be, Dims{1, 1, 10}, 10);
  net.add(std::make_unique<NoOnnx>("mystery"));
  net.build(1, 1);
  try {
    export_onnx(net, nullptr, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("layer 'mystery' (no-onnx) has no ONNX form"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cnn
