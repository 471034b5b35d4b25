// The distributed sampler: each epoch a permutation; global batches independent of the rank count.
#include <algorithm>
#include <set>

#include "io/sampler.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(Sampler, EverySampleOncePerEpochAcrossRanks) {
  const int64_t n = 1000, b = 48;  // 20 steps, 40 samples dropped
  for (int world : {1, 2, 3, 4}) {
    Sampler s(n, b, 7);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen;
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
        for (int r = 0; r < world; ++r) {
          auto v = s.rank_slice(epoch, step, r, world);
          EXPECT_EQ(static_cast<int64_t>(v.size()), b / world);
          seen.insert(seen.end(), v.begin(), v.end());
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), s.steps_per_epoch() * b);
      std::set<int64_t> uniq(seen.begin(), seen.end());
      EXPECT_EQ(uniq.size(), seen.size()) << "a sample repeats in epoch " << epoch << " with " << world << " ranks";
      EXPECT_GE(*uniq.begin(), 0);
      EXPECT_LT(*uniq.rbegin(), n);
      // Together with the dropped tail, the epoch is a permutation of all samples.
      const auto& ord = s.order(epoch);
      std::set<int64_t> all(ord.begin(), ord.end());
      EXPECT_EQ(static_cast<int64_t>(all.size()), n);
    }
  }
}

TEST(Sampler, SameGlobalBatchesForAnyRankCount) {
  const int64_t n = 500, b = 36;
  Sampler one(n, b, 3);
  for (int world : {2, 3, 4}) {
    Sampler s(n, b, 3);
    for (int64_t epoch = 0; epoch < 2; ++epoch)
      for (int64_t step = 0; step < s.steps_per_epoch(); ++step) {
        std::vector<int64_t> global;
        for (int r = 0; r < world; ++r) {
          auto v = s.rank_slice(epoch, step, r, world);
          global.insert(global.end(), v.begin(), v.end());
        }
        EXPECT_EQ(global, one.rank_slice(epoch, step, 0, 1)) << "epoch " << epoch << " step " << step;
      }
  }
}

TEST(Sampler, EpochsDifferAndSeedsMatter) {
  Sampler a(100, 10, 1), b(100, 10, 2);
  std::vector<int64_t> e0 = a.order(0), e1 = a.order(1);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, b.order(0));
  EXPECT_EQ(e0, a.order(0));  // deterministic
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(e0, sorted);
}

TEST(Sampler, ShardRangeCoversEverySampleOnce) {
  for (int world : {1, 2, 3, 4, 7})
    for (int64_t n : {0, 1, 5, 10000, 10001}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        auto [b, e] = shard_range(n, r, world);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, n / world + 1);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
}

}  // namespace
}  // namespace cnn
