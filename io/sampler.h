// The distributed sampler. Each epoch is a permutation of the global sample ids drawn from (seed, epoch);
// global batch b of the epoch is positions [b*B, (b+1)*B) of it, and rank r of W takes the contiguous slice
// [r*B/W, (r+1)*B/W) of every global batch. So the sequence of global batches is the same for any rank count
// and a run can resume on a different number of ranks. The last partial global batch (count mod B samples)
// is dropped each epoch; a different permutation next epoch drops different samples.
#pragma once
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace cnn {

class Sampler {
 public:
  Sampler(int64_t count, int64_t global_batch, uint64_t seed);
  int64_t count() const { return count_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t steps_per_epoch() const { return count_ / global_batch_; }
  // The epoch's permutation of [0, count) (a copy; the sampler caches the last epoch asked).
  std::vector<int64_t> order(int64_t epoch);
  // Rank `rank`'s slice of global batch `step` of `epoch` (global_batch must be divisible by world).
  // Thread-safe: loaders on several threads may share one sampler.
  std::vector<int64_t> rank_slice(int64_t epoch, int64_t step, int rank, int world);

 private:
  const std::vector<int64_t>& cached_order(int64_t epoch);  // callers hold mu_

  std::mutex mu_;
  int64_t count_, global_batch_;
  uint64_t seed_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

// Contiguous shard [begin, end) of `count` samples for `rank` of `world` (evaluation: every sample once).
std::pair<int64_t, int64_t> shard_range(int64_t count, int rank, int world);

}  // namespace cnn
