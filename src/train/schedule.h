// Learning-rate schedules: linear warmup from 0 to the peak over warmup_steps, then
//   constant:  peak
//   cosine:    min_lr + (peak - min_lr) * (1 + cos(pi * t)) / 2, t from 0 at the end of warmup to 1 at the end
//   step:      peak * gamma^floor(step / step_size)
//   multistep: peak * gamma^(number of milestones <= step)
// Step and multistep count from the first step (warmup included), as milestones in epochs are usually meant.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct LrSchedule {
  std::string kind = "cosine";  // cosine | constant | step | multistep
  double peak = 0.1, min_lr = 0.0;
  int64_t warmup_steps = 0, total_steps = 1;
  double gamma = 0.1;
  int64_t step_size = 1;              // step
  std::vector<int64_t> milestones;    // multistep, increasing optimizer steps
  // Learning rate of optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace cnn
