#include "io/sampler.h"

#include <numeric>

#include "kernels/rng.h"
#include "src/base/error.h"

namespace cnn {

namespace {
const uint64_t kOrderStream = 0x5348554646ull;  // "SHUFF": keeps data order apart from other RNG uses
}

Sampler::Sampler(int64_t count, int64_t global_batch, uint64_t seed)
    : count_(count), global_batch_(global_batch), seed_(seed) {
  CNN_CHECK(global_batch > 0, "global batch %lld", (long long)global_batch);
}

std::vector<int64_t> Sampler::order(int64_t epoch) {
  std::lock_guard<std::mutex> lk(mu_);
  return cached_order(epoch);
}

const std::vector<int64_t>& Sampler::cached_order(int64_t epoch) {
  if (epoch == cached_epoch_) return order_;
  order_.resize(count_);
  std::iota(order_.begin(), order_.end(), int64_t{0});
  CounterRng rng(seed_ ^ kOrderStream, static_cast<uint64_t>(epoch));
  for (int64_t i = count_ - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order_[i], order_[j]);
  }
  cached_epoch_ = epoch;
  return order_;
}

std::vector<int64_t> Sampler::rank_slice(int64_t epoch, int64_t step, int rank, int world) {
  CNN_CHECK(global_batch_ % world == 0, "global batch %lld not divisible by %d ranks", (long long)global_batch_,
            world);
  CNN_CHECK(step >= 0 && step < steps_per_epoch(), "step %lld outside epoch of %lld steps", (long long)step,
            (long long)steps_per_epoch());
  std::lock_guard<std::mutex> lk(mu_);
  const auto& ord = cached_order(epoch);
  int64_t local = global_batch_ / world;
  auto first = ord.begin() + step * global_batch_ + rank * local;
  return std::vector<int64_t>(first, first + local);
}

std::pair<int64_t, int64_t> shard_range(int64_t count, int rank, int world) {
  return {count * rank / world, count * (rank + 1) / world};
}

}  // namespace cnn
