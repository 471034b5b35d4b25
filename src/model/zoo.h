// The model zoo: networks by name, sized from the dataset (input shape, number of classes).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/model/layers.h"
#include "src/model/net.h"

namespace cnn {

// Settings the zoo passes to the layers it creates.
struct ModelOptions {
  BnOptions bn;
  // Stochastic depth of efficientnet_b0 (torchvision's stochastic_depth_prob): block b of 16 drops its residual
  // branch per sample with probability stochastic_depth * b / 16 in training; 0: never. Other models have none.
  float stochastic_depth = 0.2f;
};

std::vector<std::string> model_names();
bool is_model(const std::string& name);
// Whether --model names an ONNX file (ends in ".onnx") rather than a zoo network.
bool is_onnx_model(const std::string& name);
// Adds the named model's layers to `net`. Throws Error(kExitUsage) for unknown names.
void build_model(const std::string& name, Net& net, const ModelOptions& opt = {});

// Pieces of the builders: "conv<i>" (bias-free: the batch norm's beta is the bias) and "bn<i>" fused with its
// ReLU; the classifier head of the ResNets, global average pooling ("avgpool") and a linear layer ("fc").
void add_conv_bn_relu(Net& net, int i, int out, const ConvOptions& conv, const BnOptions& bn);
void add_pool_fc_head(Net& net);

// ResNets (src/model/resnet.cpp). CIFAR (He et al. 2016, sec. 4.2): 6n+2 layers, 16/32/64 channels, option A
// shortcuts. ImageNet: torchvision's ResNet-18/34 (basic) and ResNet-50 (bottleneck, v1.5).
void build_resnet_cifar(Net& net, int depth, const ModelOptions& opt);
void build_resnet_imagenet(Net& net, int depth, const ModelOptions& opt);
// A small ResNet for 28x28 grey images (jobs/fashion_mnist_resnet.ini).
void build_fmnist_resnet(Net& net, const ModelOptions& opt);
// torchvision's MobileNetV2 and EfficientNet-B0, with its parameter names (src/model/mobilenet.cpp).
void build_mobilenet_v2(Net& net, const ModelOptions& opt);
void build_efficientnet_b0(Net& net, const ModelOptions& opt);

}  // namespace cnn
