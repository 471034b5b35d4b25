// Optimizers over the net's flat buffers. Weight decay applies to parameters marked `decay` (weights), and to
// the others (biases, batch-norm scales and shifts) too when decay_bn_bias is set; the flat layout is walked
// as runs of equal decay and learning-rate factor so each run is one fused update; a run of factor 0 (frozen
// parameters, src/train/freeze.h) is not updated at all, its optimizer state staying zero. Batch-norm running
// statistics are not parameters (Net::buffers) and never reach an optimizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/model/net.h"

namespace cnn {

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adamw
  double momentum = 0.9, weight_decay = 0.0;
  bool nesterov = false;
  bool decay_bn_bias = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  std::vector<float> lr_mult;  // per Net::param_table() entry (FreezePlan::lr_mult); empty: all 1
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& c, Net& net);
  virtual ~Optimizer() = default;
  virtual void step(double lr) = 0;
  // New learning-rate factors (--train.unfreeze_at_epoch); the state of parameters frozen so far is zero.
  void set_lr_mult(const std::vector<float>& lr_mult);
  // Optimizer state as named flat device buffers, each num_params long (for checkpoints).
  virtual std::vector<std::pair<std::string, float*>> state() = 0;
  // Updates applied so far (AdamW's bias correction needs it; a checkpoint restores it with set_steps).
  virtual int64_t steps() const { return 0; }
  virtual void set_steps(int64_t) {}

 protected:
  struct Run {
    size_t offset, size;
    bool decay;
    float lr_mult;
  };
  OptimizerConfig c_;
  Net& net_;
  std::vector<Run> runs_;  // the updated ones (factor > 0)
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net);

}  // namespace cnn
