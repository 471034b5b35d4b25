#include "src/train/loss_ring.h"

#include "src/base/error.h"

namespace cnn {

LossRing::LossRing(Backend& be) : be_(be) {
  d_slots_ = static_cast<LossTotals*>(be_.alloc(sizeof(LossTotals) * kSlots));
  for (int k = 0; k < kSlots; ++k) mirror_[k] = be_.make_host_mirror(d_slots_ + k, sizeof(LossTotals));
}

LossRing::~LossRing() {
  for (auto& m : mirror_) m.reset();
  be_.release(d_slots_);
}

LossTotals* LossRing::begin_step(int64_t step) {
  LossTotals* slot = d_slots_ + step % kSlots;
  const LossTotals zero{0, 0};
  be_.upload(slot, &zero, sizeof zero);
  return slot;
}

void LossRing::end_step(int64_t step) {
  mirror_[step % kSlots]->refresh();
  last_ended_ = step;
}

LossTotals LossRing::take(int64_t step) {
  CNN_CHECK(step <= last_ended_ && step > last_ended_ - kSlots, "loss of step %lld asked for after step %lld ended",
            (long long)step, (long long)last_ended_);
  HostMirror& m = *mirror_[step % kSlots];
  const void* p = m.poll();
  if (!p) p = m.wait();
  return *static_cast<const LossTotals*>(p);
}

}  // namespace cnn
