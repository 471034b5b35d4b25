#include <algorithm>

#include "src/base/error.h"
#include "src/comm/grad_sync.h"

namespace cnn {

BucketedGradSync::BucketedGradSync(Collectives* owner, float* grads, size_t n, const GradSyncOptions& o)
    : owner_(owner), grads_(grads), n_(n), opt_(o) {
  const size_t per = std::max<size_t>(1, o.bucket_bytes / sizeof(float));
  for (const auto& [b, e] : o.skip)
    CNN_CHECK(b <= e && e <= n, "gradient sync: skipped range [%zu, %zu) outside [0, %zu)", b, e, n);
  for (size_t end = n; end > 0;) {
    // Buckets down to the end of the nearest skipped range below `end`, then on from its start.
    size_t low = 0, next = 0;
    for (const auto& [b, e] : o.skip)
      if (e > b && e <= end && e > low) low = e, next = b;
    for (; end > low; end = std::max(low, end > per ? end - per : 0)) {
      starts_.push_back(std::max(low, end > per ? end - per : 0));
      ends_.push_back(end);
    }
    end = next;
  }
}

void BucketedGradSync::launch_bucket(size_t i) {
  const size_t begin = bucket_begin(i), end = bucket_end(i);
  launch(i, grads_ + begin, end - begin,
         strprintf("gradient bucket %zu/%zu (elements %zu-%zu)", i + 1, starts_.size(), begin, end));
  ++counters_.buckets;
}

void BucketedGradSync::on_ready(size_t ready_offset) {
  if (!opt_.overlap) return;
  bool launched = false;
  while (next_ < starts_.size() && starts_[next_] >= ready_offset) {
    launch_bucket(next_++);
    ++counters_.launched_in_backward;
    launched = true;
  }
  if (!launched) progress();
}

double BucketedGradSync::finish() {
  while (next_ < starts_.size()) launch_bucket(next_++);
  next_ = 0;
  ++counters_.steps;
  return complete();
}

}  // namespace cnn
