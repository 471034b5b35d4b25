// An exponential moving average of the weights (--train.ema DECAY, docs/options.md): ema = d*ema + (1-d)*w
// after every optimizer update that was applied (a step skipped for a non-finite gradient or an fp16 overflow
// is no update), in fp32 beside the master weights, on the device (two Backend ops: scale and axpy). Every rank
// holds the full copy: the weights are the same on every rank after each step, and so is the average. With
// warm-up (--train.ema_warmup, as timm) update t (0-based) uses d_t = min(d, (1+t)/(10+t)).
// The buffers (batch-norm running statistics) are averaged the same way (as timm's ModelEmaV2/V3 and
// torch.optim.swa_utils.AveragedModel(use_buffers=True) do): the averaged weights are evaluated with averaged
// statistics, not with the statistics of the current weights, which do not match them. Buffers differ per rank
// (local batches), so their average does too until average_buffers-style averaging across the ranks, which the
// trainer does where it does it for the net's own buffers (evaluation, checkpoints).
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

struct EmaConfig {
  double decay = 0.0;  // 0: off
  bool warmup = false;
};

class WeightEma {
 public:
  // Starts as a copy of w[0, n) and buf[0, nb) (the initial or resumed weights and buffers).
  WeightEma(Backend& be, const EmaConfig& c, const float* w, size_t n, const float* buf = nullptr, size_t nb = 0);
  ~WeightEma();
  WeightEma(const WeightEma&) = delete;
  WeightEma& operator=(const WeightEma&) = delete;

  // The decay update t uses.
  static double decay_at(const EmaConfig& c, int64_t t);
  // Folds the weights w[0, n) and buffers buf[0, nb) of an applied update into the average.
  void update(const float* w, const float* buf = nullptr);
  float* data() { return ema_; }
  size_t size() const { return n_; }
  // The buffers' average (nb values after the weights').
  float* buffers() { return ema_ + n_; }
  size_t num_buffers() const { return nb_; }
  // Updates folded in so far (the warm-up's t; checkpoints keep it).
  int64_t updates() const { return updates_; }
  void set_updates(int64_t t) { updates_ = t; }

  // Exchanges the average with w[0, n) and buf[0, nb) (through a scratch buffer): done twice, both are as they
  // were, bit for bit. The caller refreshes what it derives from w (Net::sync_weight_copy).
  void swap_with(float* w, float* buf = nullptr);

 private:
  Backend& be_;
  EmaConfig c_;
  size_t n_, nb_;
  float* ema_ = nullptr;
  int64_t updates_ = 0;
};

}  // namespace cnn
