#include <string>
#include <vector>

#include "src/model/blocks.h"
#include "src/base/error.h"
#include "src/model/zoo.h"

namespace cnn {

void build_resnet_cifar(Net& net, int depth, const ModelOptions& opt) {
  CNN_CHECK((depth - 2) % 6 == 0, "CIFAR ResNet depth %d is not 6n+2", depth);
  const int n = (depth - 2) / 6;
  add_conv_bn_relu(net, 1, 16, {3, 1, 1, false}, opt.bn);
  const int widths[3] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage)
    for (int b = 0; b < n; ++b)
      net.add(make_basic_block(strprintf("layer%d.%d", stage + 1, b), widths[stage], stage > 0 && b == 0 ? 2 : 1,
                               Shortcut::kPad, opt.bn));
  add_pool_fc_head(net);
}

void build_resnet_imagenet(Net& net, int depth, const ModelOptions& opt) {
  std::vector<int> blocks;
  bool bottleneck = false;
  switch (depth) {
    case 18: blocks = {2, 2, 2, 2}; break;
    case 34: blocks = {3, 4, 6, 3}; break;
    case 50: blocks = {3, 4, 6, 3}; bottleneck = true; break;
    default: raise(kExitUsage, "no ImageNet ResNet of depth %d (18, 34, 50)", depth);
  }
  add_conv_bn_relu(net, 1, 64, {7, 2, 3, false}, opt.bn);
  net.add(make_maxpool("maxpool", 3, 2, 1));
  for (int stage = 0; stage < 4; ++stage) {
    const int width = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string name = strprintf("layer%d.%d", stage + 1, b);
      const int stride = stage > 0 && b == 0 ? 2 : 1;
      net.add(bottleneck ? make_bottleneck_block(name, width, stride, opt.bn)
                         : make_basic_block(name, width, stride, Shortcut::kProjection, opt.bn));
    }
  }
  add_pool_fc_head(net);
}

// Cheap enough for the reference CPU kernels (~15 MFLOP/sample forward at 28x28): a 3x3 stem, one pooling,
// then three basic blocks at 14x14 (32), 7x7 (64) and 4x4 (128) with projection shortcuts.
void build_fmnist_resnet(Net& net, const ModelOptions& opt) {
  add_conv_bn_relu(net, 1, 32, {3, 1, 1, false}, opt.bn);
  net.add(make_maxpool("pool1", 2, 2));
  net.add(make_basic_block("layer1.0", 32, 1, Shortcut::kProjection, opt.bn));
  net.add(make_basic_block("layer2.0", 64, 2, Shortcut::kProjection, opt.bn));
  net.add(make_basic_block("layer3.0", 128, 2, Shortcut::kProjection, opt.bn));
  add_pool_fc_head(net);
}

}  // namespace cnn
