// An exponential moving average of the weights (--train.ema DECAY, docs/options.md): ema = d*ema + (1-d)*w
// after every optimizer update that was applied (a step skipped for a non-finite gradient or an fp16 overflow
// is no update), in fp32 beside the master weights, on the device (two Backend ops: scale and axpy). Every rank
// holds the full copy: the weights are the same on every rank after each step, and so is the average. With
// warm-up (--train.ema_warmup, as timm) update t (0-based) uses d_t = min(d, (1+t)/(10+t)).
// Batch-norm running statistics are not averaged: the EMA weights are evaluated with the model's own running
// statistics (timm's "copy the buffers"), so they need no state of their own.
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
  // Starts as a copy of w[0, n) (the initial or resumed weights).
  WeightEma(Backend& be, const EmaConfig& c, const float* w, size_t n);
  ~WeightEma();
  WeightEma(const WeightEma&) = delete;
  WeightEma& operator=(const WeightEma&) = delete;

  // The decay update t uses.
  static double decay_at(const EmaConfig& c, int64_t t);
  // Folds the weights w[0, n) of an applied update into the average.
  void update(const float* w);
  float* data() { return ema_; }
  size_t size() const { return n_; }
  // Updates folded in so far (the warm-up's t; checkpoints keep it).
  int64_t updates() const { return updates_; }
  void set_updates(int64_t t) { updates_ = t; }

  // Exchanges the average with w[0, n) (through a scratch buffer): done twice, both are as they were, bit for
  // bit. The caller refreshes what it derives from w (Net::sync_weight_copy).
  void swap_with(float* w);

 private:
  Backend& be_;
  EmaConfig c_;
  size_t n_;
  float* ema_ = nullptr;
  int64_t updates_ = 0;
};

}  // namespace cnn
