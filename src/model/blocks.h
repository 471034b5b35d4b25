// Composite layers: a sequential chain of layers and the residual blocks of He et al. built from chains.
// A composite owns its sub-layers and their intermediate activations; its parameters and buffers are the
// concatenation of its sub-layers' (names prefixed, e.g. "conv1.weight", "downsample.0.weight"), so the
// net still sees one contiguous slice per layer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/model/layers.h"

namespace cnn {

// Layers run one after the other (no views). With an empty name the sub-layer names are not prefixed.
std::unique_ptr<Layer> make_chain(const std::string& name, std::vector<std::unique_ptr<Layer>> layers);

// How a block's shortcut changes shape when the stride or the channel count changes (identity otherwise):
// kProjection: 1x1 conv (stride) + batch norm (He et al. option B; ImageNet ResNets);
// kPad: subsample + zero channels, no parameters (option A; the CIFAR ResNets' published sizes).
enum class Shortcut { kProjection, kPad };

// Basic block: conv3x3(stride)-bn-relu-conv3x3-bn, + shortcut, relu. Output channels `out`.
std::unique_ptr<Layer> make_basic_block(const std::string& name, int out, int stride, Shortcut sc,
                                        const BnOptions& bn = {});
// Bottleneck block (ResNet v1.5: the stride sits in the 3x3 conv): conv1x1(mid)-bn-relu-conv3x3(mid, stride)
// -bn-relu-conv1x1(4*mid)-bn, + shortcut (projection when the shape changes), relu.
std::unique_ptr<Layer> make_bottleneck_block(const std::string& name, int mid, int stride,
                                             const BnOptions& bn = {});

}  // namespace cnn
