// Learning-rate schedules: linear warmup from 0 to the peak, then constant or cosine decay to min_lr.
#pragma once
#include <cstdint>
#include <string>

namespace cnn {

struct LrSchedule {
  std::string kind = "cosine";  // cosine | constant
  double peak = 0.1, min_lr = 0.0;
  int64_t warmup_steps = 0, total_steps = 1;
  // Learning rate of optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace cnn
