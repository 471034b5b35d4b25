#include "src/train/weight_ema.h"

#include <algorithm>

namespace cnn {

WeightEma::WeightEma(Backend& be, const EmaConfig& c, const float* w, size_t n, const float* buf, size_t nb)
    : be_(be), c_(c), n_(n), nb_(buf ? nb : 0) {
  ema_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(n_ + nb_, 1)));
  be_.copy(ema_, w, sizeof(float) * n_);
  if (nb_) be_.copy(ema_ + n_, buf, sizeof(float) * nb_);
}

WeightEma::~WeightEma() { be_.release(ema_); }

double WeightEma::decay_at(const EmaConfig& c, int64_t t) {
  if (!c.warmup) return c.decay;
  const double tt = static_cast<double>(t);
  return std::min(c.decay, (1.0 + tt) / (10.0 + tt));
}

void WeightEma::update(const float* w, const float* buf) {
  const double d = decay_at(c_, updates_++);
  be_.scale(n_ + nb_, static_cast<float>(d), ema_);
  be_.axpy(DType::kF32, n_, static_cast<float>(1.0 - d), w, ema_);
  if (nb_) be_.axpy(DType::kF32, nb_, static_cast<float>(1.0 - d), buf, ema_ + n_);
}

void WeightEma::swap_with(float* w, float* buf) {
  float* tmp = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(std::max(n_, nb_), 1)));
  const auto exchange = [&](float* a, float* b, size_t count) {
    const size_t bytes = sizeof(float) * count;
    be_.copy(tmp, a, bytes);
    be_.copy(a, b, bytes);
    be_.copy(b, tmp, bytes);
  };
  exchange(w, ema_, n_);
  if (nb_) exchange(buf, ema_ + n_, nb_);
  be_.release(tmp);
}

}  // namespace cnn
