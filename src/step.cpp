#include "src/step.h"

namespace cnn {

StepBuffers alloc_step_buffers(Backend& be, const Net& net) {
  const size_t n = static_cast<size_t>(net.max_batch());
  StepBuffers b;
  b.x = static_cast<float*>(be.alloc(sizeof(float) * net.input_dims().size() * n));
  b.labels = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * n));
  b.dlogits = static_cast<float*>(be.alloc(sizeof(float) * net.num_classes() * n));
  return b;
}

void free_step_buffers(Backend& be, StepBuffers& b) {
  be.release(b.x);
  be.release(b.labels);
  be.release(b.dlogits);
  b = {};
}

void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                int64_t global_batch, float label_smoothing, double lr, StepStats& stats) {
  net.zero_grads();
  const float* logits = net.forward(buf.x, n, true);
  be.softmax_xent(n, net.num_classes(), logits, buf.labels, label_smoothing, 1.0f / static_cast<float>(global_batch),
                  buf.dlogits, &stats.loss_sum, &stats.correct);
  if (sync) {
    net.backward(buf.dlogits, n, [&](size_t off) {
      be.synchronize();  // a bucket's gradient must be complete before MPI reads it
      sync->on_ready(off);
    });
    be.synchronize();
    stats.comm_s += sync->finish();
  } else {
    net.backward(buf.dlogits, n);
  }
  opt.step(lr);
}

}  // namespace cnn
