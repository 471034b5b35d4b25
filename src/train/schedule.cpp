#include "src/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace cnn {

double SwaLr::alpha(int64_t j) const {
  const double t = std::clamp(static_cast<double>(j) / static_cast<double>(std::max<int64_t>(1, anneal_epochs)),
                              0.0, 1.0);
  return cosine ? (1.0 - std::cos(M_PI * t)) / 2.0 : t;
}

double LrSchedule::at(int64_t step) const {
  if (swa.start_step < 0 || step < swa.start_step) return scheduled(step);
  const double a = swa.alpha((step - swa.start_step) / std::max<int64_t>(1, swa.steps_per_epoch));
  return swa.swa_lr * a + scheduled(swa.start_step) * (1.0 - a);
}

double LrSchedule::scheduled(int64_t step) const {
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
