#include "src/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace cnn {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == "constant") return peak;
  if (kind == "step") return peak * std::pow(gamma, static_cast<double>(step / std::max<int64_t>(1, step_size)));
  if (kind == "multistep") {
    const auto passed = std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin();
    return peak * std::pow(gamma, static_cast<double>(passed));
  }
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  return min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace cnn
