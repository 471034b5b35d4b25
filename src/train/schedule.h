// Learning-rate schedules: linear warmup from 0 to the peak over warmup_steps, then
//   constant:  peak
//   cosine:    min_lr + (peak - min_lr) * (1 + cos(pi * t)) / 2, t from 0 at the end of warmup to 1 at the end
//   step:      peak * gamma^floor(step / step_size)
//   multistep: peak * gamma^(number of milestones <= step)
// Step and multistep count from the first step (warmup included), as milestones in epochs are usually meant.
// With stochastic weight averaging (--train.swa_start_epoch) the SWA epochs follow SWALR instead (SwaLr).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

// torch.optim.swa_utils.SWALR as its standard recipe steps it, once at the end of every SWA epoch: SWA epoch j
// (0 for the first, which starts at start_step) trains at the constant rate swa_lr * a_j + lr0 * (1 - a_j),
// a_j = anneal(min(1, j / max(1, anneal_epochs))), anneal(t) = (1 - cos(pi t)) / 2 (cos) or t (linear), lr0 the
// schedule's rate at start_step. So the first SWA epoch trains at lr0 and epoch anneal_epochs on at swa_lr.
struct SwaLr {
  int64_t start_step = -1;  // -1: no SWA
  int64_t steps_per_epoch = 1;
  double swa_lr = 0;
  int64_t anneal_epochs = 10;
  bool cosine = true;  // else linear
  // The factor a_j of SWA epoch j.
  double alpha(int64_t j) const;
};

struct LrSchedule {
  std::string kind = "cosine";  // cosine | constant | step | multistep
  double peak = 0.1, min_lr = 0.0;
  int64_t warmup_steps = 0, total_steps = 1;
  double gamma = 0.1;
  int64_t step_size = 1;              // step
  std::vector<int64_t> milestones;    // multistep, increasing optimizer steps
  SwaLr swa;
  // Learning rate of optimizer step `step` (0-based), SWA epochs included.
  double at(int64_t step) const;
  // The rate of the schedule itself, as if there were no SWA epochs.
  double scheduled(int64_t step) const;
};

}  // namespace cnn
