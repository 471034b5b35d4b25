// Fusions as pattern rewrites on a Net's graph, so that an imported graph (one layer per ONNX node) runs the fused ops
// the zoo's builders use directly: batch norm followed by a ReLU, or by a capped one (ReLU6), becomes one batch norm +
// ReLU layer, and a residual join relu(bn(x) + z) one batch-norm-join layer (one pass over the activations forward and
// one backward, instead of three each). Parameter and buffer names, their order and so the checkpoint layout stay those
// of the unfused graph: the fused layer takes the batch norm's name and place.
#pragma once
#include "src/model/net.h"

namespace cnn {

struct FusionCount {
  int bn_relu = 0;         // batch norm -> ReLU
  int bn_capped_relu = 0;  // batch norm -> Clip(0, cap) (ReLU6)
  int residual_join = 0;   // batch norm -> add (with an earlier output) -> ReLU
};

// Rewrites `net` (layers added, not yet built) in place. A batch norm fuses only when the (capped) ReLU or the
// add is its output's only reader, and a join only when the add's output is read by the ReLU alone and the
// shortcut is computed before the batch norm (so the fused layer can stand where the batch norm stood).
FusionCount fuse_graph(Net& net);

}  // namespace cnn
