// The model zoo: published parameter counts, shapes for the datasets' input sizes, and a forward/backward
// pass through a CIFAR ResNet.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/model/zoo.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

size_t count(const std::string& model, Dims in, int classes) {
  auto be = make_cpu_backend(1);
  Net net(*be, in, classes);
  build_model(model, net);
  net.build(1, 1);
  return net.num_params();
}

TEST(Zoo, CifarResNetParameterCounts) {
  // He et al. 2016 table 6 (option A shortcuts): 0.27M, 0.46M, 0.66M, 0.85M, 1.7M. 6n+2 layers give
  // 97216 n - 21926 parameters for 10 classes (convolutions, batch-norm scales and shifts, the classifier).
  const Dims cifar{32, 32, 3};
  EXPECT_EQ(count("resnet20", cifar, 10), 269722u);
  EXPECT_EQ(count("resnet32", cifar, 10), 464154u);
  EXPECT_EQ(count("resnet44", cifar, 10), 658586u);
  EXPECT_EQ(count("resnet56", cifar, 10), 853018u);
  EXPECT_EQ(count("resnet110", cifar, 10), 1727962u);
  EXPECT_EQ(count("resnet20", cifar, 100), 269722u + 90 * 65);
}

TEST(Zoo, ImageNetResNetParameterCounts) {
  // torchvision's counts for 3x224x224 input and 1000 classes.
  const Dims imagenet{224, 224, 3};
  EXPECT_EQ(count("resnet18", imagenet, 1000), 11689512u);
  EXPECT_EQ(count("resnet34", imagenet, 1000), 21797672u);
  EXPECT_EQ(count("resnet50", imagenet, 1000), 25557032u);
  EXPECT_EQ(count("mobilenet_v2", imagenet, 1000), 3504872u);
  EXPECT_EQ(count("efficientnet_b0", imagenet, 1000), 5288548u);
}

// The parameter and buffer names and sizes of torchvision's state_dict (tests/onnx/torchvision/MODEL.txt, written
// by tests/onnx/torchvision_names.py), but num_batches_tracked, which cnntrain's batch norm does not keep.
void expect_torchvision_names(const std::string& model) {
  const std::string path = "tests/onnx/torchvision/" + model + ".txt";
  std::ifstream f(path);
  ASSERT_TRUE(f) << "cannot read " << path << " (run the unit tests from the repository root)";
  std::map<std::string, size_t> want, got;
  std::string name;
  size_t numel = 0;
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    if (line.empty() || line[0] == '#' || !(in >> name >> numel)) continue;
    if (name.size() < 20 || name.compare(name.size() - 20, 20, ".num_batches_tracked") != 0) want[name] = numel;
  }
  auto be = make_cpu_backend(1);
  Net net(*be, {32, 32, 3}, 1000);  // names do not depend on the image size; 32x32 builds fast
  build_model(model, net);
  net.build(1, 1);
  for (const auto* table : {&net.param_table(), &net.buffer_table()})
    for (const ParamInfo& p : *table) EXPECT_TRUE(got.emplace(p.name, p.size).second) << "twice: " << p.name;
  for (const auto& kv : want) {
    auto it = got.find(kv.first);
    if (it == got.end())
      ADD_FAILURE() << model << ": torchvision's " << kv.first << " is missing";
    else
      EXPECT_EQ(it->second, kv.second) << model << ": size of " << kv.first;
  }
  for (const auto& kv : got) EXPECT_TRUE(want.count(kv.first)) << model << ": " << kv.first << " is not torchvision's";
  EXPECT_EQ(want.size(), got.size());
}

TEST(Zoo, MobileNetAndEfficientNetHaveTorchvisionNames) {
  expect_torchvision_names("mobilenet_v2");
  expect_torchvision_names("efficientnet_b0");
}

TEST(Zoo, SmallModelsAndGreyInput) {
  const Dims fm{28, 28, 1};
  // conv 6x5x5x1+6, conv 16x5x5x6+16, fc 400->120->84->10.
  EXPECT_EQ(count("lenet5", fm, 10), 156u + 2416u + 48120u + 10164u + 850u);
  EXPECT_EQ(count("lenet5", fm, 10), 61706u);
  // conv1 16x3x3x1, bn1 2x16, conv2 32x3x3x16, bn2 2x32, fc1 1568->128, fc2 128->10 (convolutions without bias).
  EXPECT_EQ(count("fmnist_cnn", fm, 10), 144u + 32u + 4608u + 64u + 200832u + 1290u);
  // Stem 32x3x3x1 + bn; blocks 32 (identity), 64 and 128 (1x1 projection + bn); fc 128->10.
  EXPECT_EQ(count("fmnist_resnet", fm, 10), 288u + 64u + 18560u + 57728u + 230144u + 1290u);
  EXPECT_EQ(count("fmnist_resnet", fm, 10), 308074u);
  // The CIFAR and ImageNet ResNets on one grey channel: only the stem's input channels and the classifier
  // change (resnet20: 16x3x3x1 instead of 16x3x3x3; resnet18: 64x7x7x1 and fc 512->10).
  EXPECT_EQ(count("resnet20", fm, 10), 269722u - 16u * 9u * 2u);
  EXPECT_EQ(count("resnet18", fm, 10), 11689512u - 64u * 49u * 2u - 513000u + 5130u);
  // Every zoo model has a count asserted here or in the tests above.
  for (const std::string& m : model_names())
    EXPECT_TRUE(std::string(" lenet5 fmnist_cnn fmnist_resnet resnet20 resnet32 resnet44 resnet56 resnet110 resnet18 "
                            "resnet34 resnet50 mobilenet_v2 efficientnet_b0 ").find(" " + m + " ") != std::string::npos)
        << "model " << m << " has no parameter count in tests/unit/test_zoo.cpp";
}

TEST(Zoo, BatchNormBuffersAreSeparate) {
  auto be = make_cpu_backend(1);
  Net net(*be, {32, 32, 3}, 10);
  build_model("resnet20", net);
  net.build(1, 1);
  // 19 batch norms (stem + 2 per block), each with a running mean and variance.
  EXPECT_EQ(net.buffer_table().size(), 38u);
  EXPECT_EQ(net.buffer_table().front().name, "bn1.running_mean");
  EXPECT_EQ(net.buffer_table().back().name, "layer3.2.bn2.running_var");
  size_t n = 0;
  for (const auto& b : net.buffer_table()) n += b.size;
  EXPECT_EQ(n, net.num_buffers());
  EXPECT_EQ(net.param_table()[3].name, "layer1.0.conv1.weight");
}

// Plain SGD steps of `model` on 4 random images of `hw` x `hw` x 3 with labels 0-3: the losses of the first
// and the last of 8 steps.
std::pair<double, double> overfit_four(const std::string& model, int hw, float lr) {
  auto be = make_cpu_backend(1);
  Net net(*be, {hw, hw, 3}, 4);
  build_model(model, net);
  const int n = 4;
  net.build(n, 3);
  auto x = test::random_vec(static_cast<size_t>(hw) * hw * 3 * n, 5);
  std::vector<int32_t> y = {0, 1, 2, 3};
  std::vector<float> dl(n * 4);
  double first = 0, last = 0;
  for (int it = 0; it < 8; ++it) {
    double loss = 0;
    int64_t correct = 0;
    net.zero_grads();
    be->softmax_xent(DType::kF32, n, 4, static_cast<const float*>(net.forward(x.data(), n, true)), y.data(), 0.f,
                     1.f / n, dl.data(), &loss, &correct);
    net.backward(dl.data(), n);
    for (size_t i = 0; i < net.num_params(); ++i) net.params()[i] -= lr * net.grads()[i];
    if (it == 0) first = loss;
    last = loss;
  }
  return {first, last};
}

TEST(Zoo, ResNet20TrainsOnAFewSamples) {
  // A smaller image keeps the test fast; shapes are the same code path.
  const auto [first, last] = overfit_four("resnet20", 16, 0.05f);
  EXPECT_LT(last, first * 0.7) << "loss does not fall when overfitting 4 samples";
}

// MobileNetV2 and EfficientNet-B0 at 32x32 (their 1x1 final maps): training steps on 4 samples lower the loss,
// through the grouped convolutions, the squeeze-excitation scaling and the residual joins (a small learning
// rate: batch norm over 4 samples of 1x1 maps is noisy).
TEST(Zoo, MobileNetAndEfficientNetTrainAt32x32) {
  for (const std::string model : {"mobilenet_v2", "efficientnet_b0"}) {
    const auto [first, last] = overfit_four(model, 32, 0.01f);
    EXPECT_TRUE(std::isfinite(last)) << model;
    EXPECT_LT(last, first) << model << ": loss does not fall when overfitting 4 samples";
  }
}

TEST(Zoo, ModelTooLargeForImageIsUsageError) {
  auto be = make_cpu_backend(1);
  Net net(*be, {6, 6, 1}, 10);
  build_model("lenet5", net);
  try {
    net.build(1, 1);
    ADD_FAILURE() << "built lenet5 for 6x6 images";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
  }
}

}  // namespace
}  // namespace cnn
