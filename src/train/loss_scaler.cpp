#include "src/train/loss_scaler.h"

#include <cmath>

#include "src/base/error.h"

namespace cnn {

LossScaler::LossScaler(const LossScalerConfig& c) : c_(c) {
  s_.scale = c_.enabled ? c_.init_scale : 1.f;
}

bool LossScaler::update(bool found_nonfinite) {
  if (!c_.enabled) return false;
  if (found_nonfinite) {
    s_.scale *= c_.backoff_factor;
    s_.growth_tracker = 0;
    ++s_.skipped_steps;
    if (s_.scale < c_.min_scale)
      raise(kExitFailure, "fp16 loss scaling: the scale fell to %g after %lld skipped steps because every gradient "
            "held inf/NaN; the model overflows fp16 (in the forward pass or the loss): train with --precision bf16 "
            "or fp32, or a lower --train.lr", static_cast<double>(s_.scale), (long long)s_.skipped_steps);
    return true;
  }
  if (++s_.growth_tracker == c_.growth_interval) {
    const float grown = s_.scale * c_.growth_factor;
    if (std::isfinite(grown)) s_.scale = grown;
    s_.growth_tracker = 0;
  }
  return false;
}

}  // namespace cnn
