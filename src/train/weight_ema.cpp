#include "src/train/weight_ema.h"

#include <algorithm>

namespace cnn {

WeightEma::WeightEma(Backend& be, const EmaConfig& c, const float* w, size_t n) : be_(be), c_(c), n_(n) {
  ema_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(n_, 1)));
  be_.copy(ema_, w, sizeof(float) * n_);
}

WeightEma::~WeightEma() { be_.release(ema_); }

double WeightEma::decay_at(const EmaConfig& c, int64_t t) {
  if (!c.warmup) return c.decay;
  const double tt = static_cast<double>(t);
  return std::min(c.decay, (1.0 + tt) / (10.0 + tt));
}

void WeightEma::update(const float* w) {
  const double d = decay_at(c_, updates_++);
  be_.scale(n_, static_cast<float>(d), ema_);
  be_.axpy(DType::kF32, n_, static_cast<float>(1.0 - d), w, ema_);
}

void WeightEma::swap_with(float* w) {
  float* tmp = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(n_, 1)));
  const size_t bytes = sizeof(float) * n_;
  be_.copy(tmp, w, bytes);
  be_.copy(w, ema_, bytes);
  be_.copy(ema_, tmp, bytes);
  be_.release(tmp);
}

}  // namespace cnn
