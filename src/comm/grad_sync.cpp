#include "src/comm/grad_sync.h"

#include <algorithm>
#include <chrono>

namespace cnn {

GradSync::GradSync(float* grads, size_t n, size_t bucket_bytes) : grads_(grads), n_(n) {
  const size_t per = std::max<size_t>(1, bucket_bytes / sizeof(float));
  for (size_t end = n; end > 0;) {
    size_t start = end > per ? end - per : 0;
    starts_.push_back(start);
    end = start;
  }
}

void GradSync::on_ready(size_t ready_offset) {
  bool started = false;
  while (next_ < starts_.size() && starts_[next_] >= ready_offset) {
    size_t end = next_ == 0 ? n_ : starts_[next_ - 1];
    async_.start(grads_ + starts_[next_], end - starts_[next_]);
    ++next_;
    started = true;
  }
  // Without a progress thread, MPI moves non-blocking collectives only inside MPI calls: poke it.
  if (!started) async_.test_some();
}

double GradSync::finish() {
  auto t0 = std::chrono::steady_clock::now();
  on_ready(0);
  async_.wait_all();
  next_ = 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace cnn
