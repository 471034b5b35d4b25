#include "src/train/swa.h"

#include <algorithm>

#include "src/base/error.h"
#include "src/train/recipe.h"

namespace cnn {

SwaAverage::SwaAverage(Backend& be, size_t num_params, size_t num_buffers)
    : be_(be), np_(num_params), nb_(num_buffers) {
  params_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(np_, 1)));
  buffers_ = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(nb_, 1)));
  be_.fill(params_, np_, 0.f);
  be_.fill(buffers_, nb_, 0.f);
}

SwaAverage::~SwaAverage() {
  be_.release(params_);
  be_.release(buffers_);
}

void SwaAverage::update(const float* w) {
  if (models_ == 0) {
    be_.copy(params_, w, sizeof(float) * np_);
  } else {
    const double n = static_cast<double>(models_);
    be_.scale(np_, static_cast<float>(n / (n + 1)), params_);
    be_.axpy(DType::kF32, np_, static_cast<float>(1 / (n + 1)), w, params_);
  }
  ++models_;
}

void SwaAverage::swap_with(Net& net) {
  float* tmp = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(std::max(np_, nb_), 1)));
  const auto swap = [&](float* a, float* b, size_t n) {
    be_.copy(tmp, a, sizeof(float) * n);
    be_.copy(a, b, sizeof(float) * n);
    be_.copy(b, tmp, sizeof(float) * n);
  };
  swap(net.params(), params_, np_);
  swap(net.buffers(), buffers_, nb_);
  be_.release(tmp);
}

void recompute_bn_statistics(Backend& be, Net& net, const BnPass& p, const StepBuffers& buf,
                             const std::function<void(int64_t)>& load) {
  if (net.num_buffers() == 0) return;  // no batch norm: nothing to recompute
  const int k = p.accum_steps;
  CNN_CHECK(k >= 1 && p.local_batch % k == 0 && p.local_batch / k <= net.max_batch(),
            "local batch %d in %d micro-batches on a net for %d", p.local_batch, k, net.max_batch());
  const int m = p.local_batch / k;
  const size_t px = net.input_dims().size();
  for (int64_t i = 0; i < p.batches; ++i) {
    load(i);
    for (int j = 0; j < k; ++j) {
      BatchContext ctx{p.seed, i, buf.ids + static_cast<size_t>(j) * m, p.comm};
      ctx.bn_average_index = i * k + j;
      net.set_batch(ctx);
      net.forward(buf.x + static_cast<size_t>(j) * m * px, m, true);
    }
  }
  net.set_batch({p.seed, 0, nullptr, p.comm});  // the configured momentum again
  average_buffers(be, net, p.comm);
}

}  // namespace cnn
