// Optimizers over the net's flat buffers. Weight decay applies to parameters marked `decay` (weights), and to
// the others (biases, batch-norm scales and shifts) too when decay_bn_bias is set; the flat layout is walked
// as runs of equal decay and learning-rate factor so each run is one fused update; a run of factor 0 (frozen
// parameters, src/train/freeze.h) is not updated at all and has no optimizer state: the state arrays hold the
// trainable parameters only, packed in parameter order (a frozen ResNet-50 backbone costs no momentum or Adam
// moments). Batch-norm running statistics are not parameters (Net::buffers) and never reach an optimizer.
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
  // `state_names`: the arrays of state each trainable parameter has ("momentum"; "exp_avg", "exp_avg_sq").
  Optimizer(const OptimizerConfig& c, Backend& be, Net& net, std::vector<std::string> state_names);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual void step(double lr) = 0;
  // New learning-rate factors (--train.unfreeze_at_epoch). Where the set of trainable parameters changes, the
  // state is laid out anew: parameters trainable before and after keep theirs, newly trainable ones start at
  // zero, newly frozen ones lose theirs.
  void set_lr_mult(const std::vector<float>& lr_mult);
  const std::vector<std::string>& state_names() const { return names_; }
  // Device bytes of optimizer state (every array; trainable parameters only).
  size_t state_bytes() const { return names_.size() * sizeof(float) * state_size_; }
  // State array k as a num_params() long host array, zero for frozen parameters, and back (checkpoints keep
  // that layout, so one resumes whatever is frozen, on any rank count).
  void download_state(size_t k, float* host) const;
  void upload_state(size_t k, const float* host);
  // Updates applied so far (AdamW's bias correction needs it; a checkpoint restores it with set_steps).
  virtual int64_t steps() const { return 0; }
  virtual void set_steps(int64_t) {}

 protected:
  struct Run {
    size_t offset, size;  // in the parameters
    size_t at;            // in the state arrays
    bool decay;
    float lr_mult;
  };
  OptimizerConfig c_;
  Backend& be_;
  Net& net_;
  std::vector<Run> runs_;      // the updated ones (factor > 0)
  std::vector<float*> state_;  // one per state name, state_size_ values each

 private:
  std::vector<std::string> names_;
  size_t state_size_ = 0;
  std::vector<size_t> at_;  // per param_table() entry: its offset in the state arrays, npos when frozen
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net);

}  // namespace cnn
