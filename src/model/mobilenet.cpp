// The inverted-residual networks as torchvision defines them (torchvision.models.mobilenet_v2 and
// efficientnet_b0, width and depth multipliers 1): the same layers, channel counts and parameter names
// (the state_dict keys, e.g. "features.1.conv.0.0.weight"), so a torchvision state_dict maps 1:1 by name.
// Layers without parameters (activations, joins) are named after torchvision's modules where it has one.
#include <algorithm>
#include <string>

#include "src/base/error.h"
#include "src/model/zoo.h"

namespace cnn {

namespace {

const Activation kRelu6{ActKind::kClip, 0.f, 6.f};
const Activation kSilu{ActKind::kSilu, 0.f, 0.f};
const Activation kSigmoid{ActKind::kSigmoid, 0.f, 0.f};

// The name of the layer the next one reads ("input" before the first).
std::string last_layer(const Net& net) { return net.layers().empty() ? "input" : net.layers().back()->name(); }

// torchvision's Conv2dNormActivation: "<p>.0" convolution (no bias, padding (k-1)/2), "<p>.1" batch norm and,
// unless act is null, "<p>.2" the activation; ReLU6 runs fused into the batch norm "<p>.1" (one pass over the
// activations each way instead of two: fuse_graph does the same to an imported graph).
void conv_norm_act(Net& net, const std::string& p, int out, int k, int stride, int groups, const Activation* act,
                   const BnOptions& bn) {
  ConvOptions o;
  o.kernel = k;
  o.stride = stride;
  o.pad = (k - 1) / 2;
  o.bias = false;
  o.groups = groups;
  net.add(make_conv2d(p + ".0", out, o));
  if (act == &kRelu6) {
    net.add(make_batchnorm(p + ".1", bn, BnAct::relu_capped(kRelu6.beta)));
    return;
  }
  net.add(make_batchnorm(p + ".1", bn));
  if (act) net.add(make_activation(p + ".2", *act));
}

// The classifier of both: global average pooling, dropout 0.2 ("classifier.0"), linear ("classifier.1").
void pool_dropout_fc(Net& net) {
  net.add(make_global_avgpool("avgpool"));
  net.add(make_dropout("classifier.0", 0.2f));
  net.add(make_linear("classifier.1", net.num_classes()));
}

// The residual join of a block whose input was `x`, when its shape is unchanged (torchvision's use_res_connect),
// with stochastic depth of drop probability p > 0.
void residual(Net& net, const std::string& name, const std::string& x, float p = 0.f) {
  net.add(p > 0.f ? make_stochastic_depth_add(name, p) : make_add(name), {x, last_layer(net)});
}

// Squeeze-excitation "<p>": x * sigmoid(fc2(silu(fc1(mean over H,W of x)))), fc1/fc2 1x1 convolutions with bias.
void squeeze_excitation(Net& net, const std::string& p, int channels, int squeeze) {
  const std::string x = last_layer(net);
  net.add(make_global_avgpool(p + ".avgpool"));
  net.add(make_conv2d(p + ".fc1", squeeze, {1, 1, 0, true}));
  net.add(make_activation(p + ".activation", kSilu));
  net.add(make_conv2d(p + ".fc2", channels, {1, 1, 0, true}));
  net.add(make_activation(p + ".scale_activation", kSigmoid));
  net.add(make_mul(p + ".scale"), {x, last_layer(net)});
}

}  // namespace

// Sandler et al. 2018, table 2: a 3x3 stem (32, stride 2), 17 inverted residual blocks (1x1 expansion by t,
// 3x3 depthwise, 1x1 linear projection; ReLU6), a 1x1 convolution to 1280, pooling and the classifier.
void build_mobilenet_v2(Net& net, const ModelOptions& opt) {
  struct Stage {
    int t, c, n, s;  // expansion, output channels, blocks, stride of the first
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  conv_norm_act(net, "features.0", 32, 3, 2, 1, &kRelu6, opt.bn);
  int in = 32, f = 1;
  for (const Stage& st : stages)
    for (int i = 0; i < st.n; ++i, ++f) {
      const std::string p = strprintf("features.%d.conv", f), x = last_layer(net);
      const int stride = i == 0 ? st.s : 1, hidden = in * st.t;
      int j = 0;
      if (st.t != 1) conv_norm_act(net, strprintf("%s.%d", p.c_str(), j++), hidden, 1, 1, 1, &kRelu6, opt.bn);
      conv_norm_act(net, strprintf("%s.%d", p.c_str(), j++), hidden, 3, stride, hidden, &kRelu6, opt.bn);
      net.add(make_conv2d(strprintf("%s.%d", p.c_str(), j++), st.c, {1, 1, 0, false}));
      net.add(make_batchnorm(strprintf("%s.%d", p.c_str(), j++), opt.bn));
      if (stride == 1 && in == st.c) residual(net, strprintf("features.%d.add", f), x);
      in = st.c;
    }
  conv_norm_act(net, "features.18", 1280, 1, 1, 1, &kRelu6, opt.bn);
  pool_dropout_fc(net);
}

// Tan and Le 2019, table 1: a 3x3 stem (32, stride 2), 16 MBConv blocks (1x1 expansion, kxk depthwise,
// squeeze-excitation to a quarter of the block's input channels, 1x1 projection; SiLU), a 1x1 convolution to
// 1280, pooling and the classifier. Stochastic depth as torchvision's: block b (0..15, over all stages) drops its
// residual branch with probability opt.stochastic_depth * b / 16 in training (blocks with a residual join only).
void build_efficientnet_b0(Net& net, const ModelOptions& opt) {
  struct Stage {
    int t, k, s, out, n;  // expansion, kernel, stride of the first block, output channels, blocks
  };
  const Stage stages[] = {{1, 3, 1, 16, 1}, {6, 3, 2, 24, 2}, {6, 5, 2, 40, 2}, {6, 3, 2, 80, 3},
                          {6, 5, 1, 112, 3}, {6, 5, 2, 192, 4}, {6, 3, 1, 320, 1}};
  int blocks = 0;  // 16
  for (const Stage& st : stages) blocks += st.n;
  conv_norm_act(net, "features.0", 32, 3, 2, 1, &kSilu, opt.bn);
  int in = 32, block = 0;
  for (int si = 0; si < 7; ++si) {
    const Stage& st = stages[si];
    for (int i = 0; i < st.n; ++i, ++block) {
      const std::string b = strprintf("features.%d.%d", si + 1, i), p = b + ".block", x = last_layer(net);
      const int stride = i == 0 ? st.s : 1, expanded = in * st.t;
      int j = 0;
      if (expanded != in) conv_norm_act(net, strprintf("%s.%d", p.c_str(), j++), expanded, 1, 1, 1, &kSilu, opt.bn);
      conv_norm_act(net, strprintf("%s.%d", p.c_str(), j++), expanded, st.k, stride, expanded, &kSilu, opt.bn);
      squeeze_excitation(net, strprintf("%s.%d", p.c_str(), j++), expanded, std::max(1, in / 4));
      conv_norm_act(net, strprintf("%s.%d", p.c_str(), j++), st.out, 1, 1, 1, nullptr, opt.bn);
      if (stride == 1 && in == st.out) residual(net, b + ".add", x, opt.stochastic_depth * block / blocks);
      in = st.out;
    }
  }
  conv_norm_act(net, "features.8", 1280, 1, 1, 1, &kSilu, opt.bn);
  pool_dropout_fc(net);
}

}  // namespace cnn
