// The fusion rewrites on graphs (src/model/graph_rewrite.h): a ResNet-style graph as the ONNX importer builds
// it (one layer per node: batch norm, ReLU and add apart) rewritten into the fused layers computes the same
// losses, gradients and running statistics as before, under the same parameter and buffer names and offsets;
// batch norms whose output is read elsewhere too stay unfused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/model/graph_rewrite.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

std::vector<float> download(Backend& be, const void* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

void conv_bn(Net& net, const std::string& conv, const std::string& bn, const std::string& in, int k, int stride,
             int kernel = 3) {
  net.add(make_conv2d(conv, k, {kernel, stride, kernel / 2, false}), {in});
  net.add(make_batchnorm(bn), {conv});
}

// torchvision's ResNet as its ONNX export orders the nodes: stem conv-bn-relu; a basic block with an identity
// shortcut; one with stride 2 whose projection (downsample.0/1) comes after bn2, so the join's later batch
// norm is the projection's; a last batch norm read by both a ReLU and an add (not fusable); pool, fc.
void build_resnet_graph(Net& net, int classes) {
  conv_bn(net, "conv1", "bn1", "input", 8, 1);
  net.add(make_relu("relu"), {"bn1"});
  conv_bn(net, "layer1.0.conv1", "layer1.0.bn1", "relu", 8, 1);
  net.add(make_relu("layer1.0.relu"), {"layer1.0.bn1"});
  conv_bn(net, "layer1.0.conv2", "layer1.0.bn2", "layer1.0.relu", 8, 1);
  net.add(make_add("layer1.0.add"), {"layer1.0.bn2", "relu"});
  net.add(make_relu("layer1.0.relu_1"), {"layer1.0.add"});
  conv_bn(net, "layer2.0.conv1", "layer2.0.bn1", "layer1.0.relu_1", 16, 2);
  net.add(make_relu("layer2.0.relu"), {"layer2.0.bn1"});
  conv_bn(net, "layer2.0.conv2", "layer2.0.bn2", "layer2.0.relu", 16, 1);
  conv_bn(net, "layer2.0.downsample.0", "layer2.0.downsample.1", "layer1.0.relu_1", 16, 2, 1);
  net.add(make_add("layer2.0.add"), {"layer2.0.bn2", "layer2.0.downsample.1"});
  net.add(make_relu("layer2.0.relu_1"), {"layer2.0.add"});
  conv_bn(net, "head.conv", "head.bn", "layer2.0.relu_1", 16, 1);
  net.add(make_relu("head.relu"), {"head.bn"});
  net.add(make_add("head.add"), {"head.relu", "head.bn"});
  net.add(make_global_avgpool("avgpool"), {"head.add"});
  net.add(make_flatten("flatten"), {"avgpool"});
  net.add(make_linear("fc", classes), {"flatten"});
}

struct Pass {
  double loss = 0;
  std::vector<float> grads, buffers;
};

Pass train_pass(Backend& be, Net& net, const std::vector<float>& x, const std::vector<int32_t>& y, int n) {
  float* d_x = static_cast<float*>(be.alloc(sizeof(float) * x.size()));
  int32_t* d_y = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * y.size()));
  float* d_dl = static_cast<float*>(be.alloc(sizeof(float) * y.size() * net.num_classes()));
  be.upload(d_x, x.data(), sizeof(float) * x.size());
  be.upload(d_y, y.data(), sizeof(int32_t) * y.size());
  Pass p;
  int64_t correct = 0;
  net.zero_grads();
  be.softmax_xent(DType::kF32, n, net.num_classes(), net.forward(d_x, n, true), d_y, 0.f, 1.f / n, d_dl, &p.loss,
                  &correct);
  net.backward(d_dl, n);
  p.grads = download(be, net.grads(), net.num_params());
  p.buffers = download(be, net.buffers(), net.num_buffers());
  be.release(d_x);
  be.release(d_y);
  be.release(d_dl);
  return p;
}

// The fused net keeps the unfused one's parameter and buffer names at the same offsets (checkpoints and the
// allreduce buckets cannot tell the two apart) and trains to the same bits: two steps' worth of passes on the
// batch (x, y), the second seeing the running statistics the first left. Both nets built.
void expect_same_tables_and_training(Backend& be, Net& plain, Net& fused, const std::vector<float>& x,
                                     const std::vector<int32_t>& y, int n) {
  for (auto table : {&Net::param_table, &Net::buffer_table}) {
    ASSERT_EQ((plain.*table)().size(), (fused.*table)().size());
    for (size_t i = 0; i < (plain.*table)().size(); ++i) {
      EXPECT_EQ((plain.*table)()[i].name, (fused.*table)()[i].name);
      EXPECT_EQ((plain.*table)()[i].offset, (fused.*table)()[i].offset);
    }
  }
  for (int step = 0; step < 2; ++step) {
    const Pass a = train_pass(be, plain, x, y, n), b = train_pass(be, fused, x, y, n);
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
    EXPECT_TRUE(all_close(b.grads, a.grads, 0, 0, "parameter gradients"));
    EXPECT_TRUE(all_close(b.buffers, a.buffers, 0, 0, "running statistics"));
  }
}

class GraphRewrite : public ::testing::TestWithParam<CpuKernels> {};

TEST_P(GraphRewrite, FusedGraphTrainsAsTheUnfusedOne) {
  auto be = make_cpu_backend(1, GetParam());
  constexpr int kN = 4, kClasses = 5;
  const Dims in{8, 8, 3};
  Net plain(*be, in, kClasses), fused(*be, in, kClasses);
  build_resnet_graph(plain, kClasses);
  build_resnet_graph(fused, kClasses);
  const FusionCount c = fuse_graph(fused);
  EXPECT_EQ(c.bn_relu, 3);        // bn1, layer1.0.bn1, layer2.0.bn1; not head.bn (also read by head.add)
  EXPECT_EQ(c.residual_join, 2);  // layer1.0.bn2 + relu, layer2.0.downsample.1 + layer2.0.bn2
  EXPECT_EQ(fused.layers().size(), plain.layers().size() - 3 - 2 * 2);
  plain.build(kN, 9);
  fused.build(kN, 9);
  const std::string summary = fused.summary();
  EXPECT_NE(summary.find("layer2.0.downsample.1 batchnorm 16 eps 1e-05 momentum 0.1 + add + relu"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("<- layer2.0.downsample.0, layer2.0.bn2"), std::string::npos) << summary;
  // The fused kernels compute relu(bn(x) + z) from the same fp32 bn(x) as the separate layers: equal up to the
  // order of the fp32 reductions inside the kernels (none here: identical results expected).
  expect_same_tables_and_training(*be, plain, fused, random_vec(in.size() * kN, 3), {0, 3, 1, 4}, kN);
}

// MobileNetV2's pattern as its ONNX export has it: conv-bn-Clip(0, cap), a pointwise and a depthwise
// conv-bn-Clip, a linear projection conv-bn added to the block input; then a Clip that is no capped ReLU
// (min -1), which stays a layer of its own. The cap is 0.5 instead of ReLU6's 6 so that the random
// batch-normalised activations (about N(0, 1)) reach it.
void build_mobilenet_graph(Net& net, int classes) {
  const Activation capped{ActKind::kClip, 0.f, 0.5f}, hardtanh{ActKind::kClip, -1.f, 1.f};
  conv_bn(net, "features.0.0", "features.0.1", "input", 16, 1);
  net.add(make_activation("features.0.2", capped), {"features.0.1"});
  conv_bn(net, "features.1.conv.0.0", "features.1.conv.0.1", "features.0.2", 32, 1, 1);
  net.add(make_activation("features.1.conv.0.2", capped), {"features.1.conv.0.1"});
  net.add(make_conv2d("features.1.conv.1.0", 32, {3, 1, 1, false, 32}), {"features.1.conv.0.2"});
  net.add(make_batchnorm("features.1.conv.1.1"), {"features.1.conv.1.0"});
  net.add(make_activation("features.1.conv.1.2", capped), {"features.1.conv.1.1"});
  conv_bn(net, "features.1.conv.2", "features.1.conv.3", "features.1.conv.1.2", 16, 1, 1);
  net.add(make_add("features.1.add"), {"features.0.2", "features.1.conv.3"});
  conv_bn(net, "head.conv", "head.bn", "features.1.add", 16, 1, 1);
  net.add(make_activation("head.hardtanh", hardtanh), {"head.bn"});
  net.add(make_global_avgpool("avgpool"), {"head.hardtanh"});
  net.add(make_flatten("flatten"), {"avgpool"});
  net.add(make_linear("fc", classes), {"flatten"});
}

TEST_P(GraphRewrite, CappedReluFusesIntoItsBatchNormAndTrainsAsBefore) {
  auto be = make_cpu_backend(1, GetParam());
  constexpr int kN = 4, kClasses = 5;
  const Dims in{8, 8, 3};
  Net plain(*be, in, kClasses), fused(*be, in, kClasses);
  build_mobilenet_graph(plain, kClasses);
  build_mobilenet_graph(fused, kClasses);
  const FusionCount c = fuse_graph(fused);
  EXPECT_EQ(c.bn_capped_relu, 3);  // not head.bn: Clip(-1, 1) is no capped ReLU
  EXPECT_EQ(c.bn_relu, 0);
  EXPECT_EQ(c.residual_join, 0);   // features.1.add has no ReLU after it
  EXPECT_EQ(fused.layers().size(), plain.layers().size() - 3);
  plain.build(kN, 9);
  fused.build(kN, 9);
  const std::string summary = fused.summary();
  EXPECT_NE(summary.find("features.1.conv.1.1 batchnorm 32 eps 1e-05 momentum 0.1 + relu capped at 0.5"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("head.hardtanh"), std::string::npos) << summary;
  // Clip and the fused cap clamp the same fp32 values, and the mask passes the gradient where Clip's derivative
  // does: identical results.
  expect_same_tables_and_training(*be, plain, fused, random_vec(in.size() * kN, 4), {1, 0, 4, 2}, kN);
}

INSTANTIATE_TEST_SUITE_P(Kernels, GraphRewrite, ::testing::Values(CpuKernels::kReference, CpuKernels::kFast),
                         [](const ::testing::TestParamInfo<CpuKernels>& i) {
                           return std::string(i.param == CpuKernels::kFast ? "fast" : "reference");
                         });

}  // namespace
}  // namespace cnn::test
