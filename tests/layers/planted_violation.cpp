// Linked into a copy of the base library by `make test-layers`: the base layer calling into the comm layer
// must make tests/layers/check_layers.sh fail.
#include "src/comm/comm.h"

namespace cnn {
int planted_layer_violation() { return world_rank(); }
}  // namespace cnn
