#include "src/train/step.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace cnn {

StepBuffers alloc_step_buffers(Backend& be, const Net& net, int local_batch) {
  const size_t n = static_cast<size_t>(std::max(local_batch, net.max_batch()));
  StepBuffers b;
  b.x = static_cast<float*>(be.alloc(sizeof(float) * net.input_dims().size() * n));
  b.labels = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * n));
  b.ids = static_cast<int64_t*>(be.alloc(sizeof(int64_t) * n));
  b.mix = static_cast<MixDraw*>(be.alloc(sizeof(MixDraw) * n));
  b.dlogits = be.alloc(dtype_size(net.dtype()) * net.num_classes() * net.max_batch());
  b.totals = static_cast<LossTotals*>(be.alloc(sizeof(LossTotals)));
  const LossTotals zero{0, 0};
  be.upload(b.totals, &zero, sizeof zero);
  if (net.num_buffers()) b.saved_buffers = static_cast<float*>(be.alloc(sizeof(float) * net.num_buffers()));
  return b;
}

void take_loss_totals(Backend& be, const StepBuffers& b, double* loss_sum, int64_t* correct) {
  LossTotals t{0, 0};
  be.download(&t, b.totals, sizeof t);
  *loss_sum = t.loss_sum;
  *correct = static_cast<int64_t>(t.correct);
  const LossTotals zero{0, 0};
  be.upload(b.totals, &zero, sizeof zero);
}

void free_step_buffers(Backend& be, StepBuffers& b) {
  be.release(b.x);
  be.release(b.labels);
  be.release(b.ids);
  be.release(b.mix);
  be.release(b.dlogits);
  be.release(b.totals);
  if (b.saved_buffers) be.release(b.saved_buffers);
  b = {};
}

namespace {

void mark(const StepConfig& sc, Phase p) {
  if (sc.timing) sc.timing->mark(p);
}

// Whether the averaged gradient (the same on every rank, so every rank reaches the same verdict) is free of
// inf and NaN: the non-finite guard's agreed count where the run has one (read now, for the loss scaler must
// know before the next step), else its sum of squares in double, finite exactly when every value is.
bool averaged_gradient_finite(Backend& be, Net& net, NonFiniteGuard* guard) {
  if (!guard) return std::isfinite(be.sum_squares(net.num_params(), net.grads()));
  int64_t bad = 0;
  be.download(&bad, guard->d_flag(), sizeof bad);
  return bad == 0;
}

}  // namespace

void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                const StepConfig& sc, double lr, StepStats& stats) {
  const int k = sc.accum_steps;
  CNN_CHECK(k >= 1 && n % k == 0 && n / k <= net.max_batch(), "local batch %d in %d micro-batches on a net for %d",
            n, k, net.max_batch());
  const int m = n / k;
  const size_t px = net.input_dims().size();
  const float loss_scale = sc.scaler ? sc.scaler->scale() : 1.f;
  net.zero_grads();
  NonFiniteGuard* guard = sc.nonfinite;
  if (guard) guard->begin_step(sc.step);
  // Where the host learns that the step is skipped, the step leaves the running statistics as they were too.
  // (The device-gated skip, --train.on_nonfinite skip with SGD and no EMA, gates only the weight update.)
  const bool host_skip = (sc.scaler && sc.scaler->enabled()) || (guard && sc.count_only_applied);
  const size_t buffer_bytes = sizeof(float) * net.num_buffers();
  if (host_skip && buf.saved_buffers) be.copy(buf.saved_buffers, net.buffers(), buffer_bytes);
  const auto skip = [&] {
    if (host_skip && buf.saved_buffers) be.copy(net.buffers(), buf.saved_buffers, buffer_bytes);
    if (sc.timing) sc.timing->idle();
  };
  for (int i = 0; i < k; ++i) {
    mark(sc, Phase::kForward);
    net.set_batch({sc.seed, sc.step, sc.ids ? sc.ids + static_cast<size_t>(i) * m : nullptr,
                   sync ? sync->collectives() : nullptr});
    const void* logits = net.forward(buf.x + static_cast<size_t>(i) * m * px, m, true);
    const int32_t* labels = buf.labels + static_cast<size_t>(i) * m;
    const float scale = loss_scale / static_cast<float>(sc.global_batch);
    LossTotals* totals = sc.totals ? sc.totals : buf.totals;
    if (sc.mix)
      be.softmax_xent_mix_totals(net.dtype(), m, net.num_classes(), logits, labels, sc.mix + static_cast<size_t>(i) * m,
                                 sc.label_smoothing, scale, buf.dlogits, totals);
    else
      be.softmax_xent_totals(net.dtype(), m, net.num_classes(), logits, labels, sc.label_smoothing, scale,
                             buf.dlogits, totals);
    mark(sc, Phase::kBackward);
    // Only the last micro-batch's backward overlaps the allreduce: earlier ones are still accumulating.
    if (sync && i == k - 1) {
      net.backward(buf.dlogits, m, [&](size_t off) {
        if (guard) guard->check_ready(off);  // this rank's own gradient, before the allreduce sums it in place
        sync->on_ready(off > sc.sync_offset ? off - sc.sync_offset : 0);
      });
      mark(sc, Phase::kComm);
      stats.comm_s += sync->finish();
    } else {
      net.backward(buf.dlogits, m);
    }
  }
  for (const auto& [b, e] : sc.frozen_inside) be.fill(net.grads() + b, e - b, 0.f);
  mark(sc, Phase::kOptimizer);
  if (guard) guard->check_agreed();  // gates opt.step through Backend::set_update_gate
  if (sc.scaler && sc.scaler->enabled()) {
    if (sc.scaler->update(!averaged_gradient_finite(be, net, guard))) {
      ++stats.skipped;
      skip();
      return;
    }
    be.scale(net.num_params(), 1.f / loss_scale, net.grads());
  } else if (guard && sc.count_only_applied && !averaged_gradient_finite(be, net, guard)) {
    skip();
    return;
  }
  if (sc.clip_norm > 0) {
    // Every rank holds the same averaged gradient here, so every rank clips by the same factor.
    const double norm = std::sqrt(be.sum_squares(net.num_params(), net.grads()));
    stats.grad_norm = norm;
    if (norm > sc.clip_norm) be.scale(net.num_params(), static_cast<float>(sc.clip_norm / norm), net.grads());
  }
  opt.step(lr);
  net.sync_weight_copy();
  if (sc.ema) sc.ema->update(static_cast<const Net&>(net).params(), net.buffers());
  if (sc.timing) sc.timing->idle();
}

void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                int64_t global_batch, float label_smoothing, double lr, StepStats& stats) {
  StepConfig sc;
  sc.global_batch = global_batch;
  sc.label_smoothing = label_smoothing;
  train_step(be, net, opt, sync, buf, n, sc, lr, stats);
}

}  // namespace cnn
