// Optimizers over the net's flat buffers. Weight decay applies to parameters marked `decay` (weights, not
// biases); the flat layout is walked as runs of equal decay so each run is one fused update.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/net.h"

namespace cnn {

struct OptimizerConfig {
  std::string kind = "sgd";
  double momentum = 0.9, weight_decay = 0.0;
  bool nesterov = false;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(double lr) = 0;
  // Optimizer state as named flat device buffers, each num_params long (for checkpoints).
  virtual std::vector<std::pair<std::string, float*>> state() = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net);

}  // namespace cnn
