#include "src/model/zoo.h"

#include <functional>
#include <map>

#include "src/base/error.h"

namespace cnn {

namespace {

using Builder = std::function<void(Net&, const ModelOptions&)>;

// LeNet-5 with ReLU and max pooling; padding 2 in the first layer keeps 28x28 inputs at the classic 32x32 size.
void lenet5(Net& net, const ModelOptions&) {
  net.add(make_conv2d("conv1", 6, {5, 1, 2, true}));
  net.add(make_maxpool("pool1", 2, 2, 0, true));  // relu1 + pool1
  net.add(make_conv2d("conv2", 16, {5, 1, 0, true}));
  net.add(make_maxpool("pool2", 2, 2, 0, true));  // relu2 + pool2
  net.add(make_flatten("flatten"));
  net.add(make_linear("fc1", 120));
  net.add(make_relu("relu3"));
  net.add(make_linear("fc2", 84));
  net.add(make_relu("relu4"));
  net.add(make_linear("fc3", net.num_classes()));
}

// A small CNN for 28x28 grey images: two 3x3 conv + batch norm + pool stages and a 128-unit hidden layer
// (~2.5 MFLOP/sample forward, so `make run` stays a few minutes on the reference kernels).
void fmnist_cnn(Net& net, const ModelOptions& o) {
  add_conv_bn_relu(net, 1, 16, {3, 1, 1, false}, o.bn);
  net.add(make_maxpool("pool1", 2, 2));
  add_conv_bn_relu(net, 2, 32, {3, 1, 1, false}, o.bn);
  net.add(make_maxpool("pool2", 2, 2));
  net.add(make_flatten("flatten"));
  net.add(make_linear("fc1", 128));
  net.add(make_relu("relu3"));
  net.add(make_linear("fc2", net.num_classes()));
}

const std::map<std::string, Builder>& registry() {
  static const std::map<std::string, Builder> r = {
      {"lenet5", lenet5},
      {"fmnist_cnn", fmnist_cnn},
      {"fmnist_resnet", build_fmnist_resnet},
      {"resnet20", [](Net& n, const ModelOptions& o) { build_resnet_cifar(n, 20, o); }},
      {"resnet32", [](Net& n, const ModelOptions& o) { build_resnet_cifar(n, 32, o); }},
      {"resnet44", [](Net& n, const ModelOptions& o) { build_resnet_cifar(n, 44, o); }},
      {"resnet56", [](Net& n, const ModelOptions& o) { build_resnet_cifar(n, 56, o); }},
      {"resnet110", [](Net& n, const ModelOptions& o) { build_resnet_cifar(n, 110, o); }},
      {"resnet18", [](Net& n, const ModelOptions& o) { build_resnet_imagenet(n, 18, o); }},
      {"resnet34", [](Net& n, const ModelOptions& o) { build_resnet_imagenet(n, 34, o); }},
      {"resnet50", [](Net& n, const ModelOptions& o) { build_resnet_imagenet(n, 50, o); }},
      {"mobilenet_v2", build_mobilenet_v2},
      {"efficientnet_b0", build_efficientnet_b0},
  };
  return r;
}

}  // namespace

void add_conv_bn_relu(Net& net, int i, int out, const ConvOptions& conv, const BnOptions& bn) {
  net.add(make_conv2d(strprintf("conv%d", i), out, conv));
  net.add(make_batchnorm(strprintf("bn%d", i), bn, true));
}

void add_pool_fc_head(Net& net) {
  net.add(make_global_avgpool("avgpool"));
  net.add(make_linear("fc", net.num_classes()));
}

std::vector<std::string> model_names() {
  std::vector<std::string> v;
  for (const auto& kv : registry()) v.push_back(kv.first);
  return v;
}

bool is_model(const std::string& name) { return registry().count(name) > 0; }

bool is_onnx_model(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".onnx") == 0;
}

void build_model(const std::string& name, Net& net, const ModelOptions& opt) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string all;
    for (const auto& n : model_names()) all += (all.empty() ? "" : ", ") + n;
    raise(kExitUsage, "unknown model '%s' (--model); available: %s", name.c_str(), all.c_str());
  }
  it->second(net, opt);
}

}  // namespace cnn
