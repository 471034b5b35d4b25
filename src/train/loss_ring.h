// Per-step loss sums and correct counts, added up on the device and read on the host a step or two later
// without synchronising: each step adds into its own slot of a small device ring (StepConfig::totals), and
// the slot's copy to the host (a HostMirror) is queued right behind the step. By the time the host asks for a
// step's sums (when the non-finite guard's verdict on that step arrives, which is queued after it), the copy
// has landed.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace cnn {

class LossRing {
 public:
  explicit LossRing(Backend& be);
  ~LossRing();
  LossRing(const LossRing&) = delete;
  LossRing& operator=(const LossRing&) = delete;

  // The zeroed device slot step `step` adds its sums to (zeroed in stream order).
  LossTotals* begin_step(int64_t step);
  // Queues the copy of the step's sums to the host: call once the step's work is queued.
  void end_step(int64_t step);
  // The sums of `step`, one of the last kSlots steps ended; waits for their copy only if it has not landed.
  LossTotals take(int64_t step);

  static constexpr int kSlots = 8;

 private:
  Backend& be_;
  LossTotals* d_slots_ = nullptr;
  std::unique_ptr<HostMirror> mirror_[kSlots];
  int64_t last_ended_ = -1;
};

}  // namespace cnn
