// Dynamic loss scaling for fp16 training, with the semantics of torch.cuda.amp.GradScaler: the loss gradient
// is multiplied by scale() before the backward pass; after it, update() gets the verdict "the averaged
// gradient holds an inf or a NaN" (the same on every rank) and says whether to skip the optimizer update.
// A skipped step halves the scale and restarts the growth count; growth_interval finite steps in a row
// double it (unless that overflows fp32). Pure host logic; docs/mixed_precision.md has the whole step.
// Disabled (fp32 and bf16 runs): scale 1, never skips.
#pragma once
#include <cstdint>

namespace cnn {

struct LossScalerConfig {
  bool enabled = false;
  float init_scale = 65536.f;
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  // A scale below this means fp16 cannot represent the gradients at all (every step overflowed, e.g. a
  // forward pass producing inf/NaN in fp16): update() throws instead of training on with vanishing scales.
  float min_scale = 1.f / 16384;  // fp16's smallest normal number, 2^-14
};

// What a checkpoint stores so that a resumed run skips and grows exactly where the uninterrupted one does.
struct LossScalerState {
  float scale = 1.f;
  int64_t growth_tracker = 0;  // consecutive finite steps since the scale last changed
  int64_t skipped_steps = 0;   // total steps skipped so far
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& c);
  bool enabled() const { return c_.enabled; }
  float scale() const { return s_.scale; }
  // One call per optimizer step. Returns true when the step must be skipped (no optimizer update).
  // Throws Error(kExitFailure) when the scale falls below min_scale.
  bool update(bool found_nonfinite);
  const LossScalerState& state() const { return s_; }
  void restore(const LossScalerState& s) { s_ = s; }

 private:
  LossScalerConfig c_;
  LossScalerState s_;
};

}  // namespace cnn
