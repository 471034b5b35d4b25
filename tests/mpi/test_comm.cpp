// The MPI layer: ranks, topology and the basic collectives (the full sweep: test_comm_sweep.cpp).
#include <numeric>

#include "src/comm/comm.h"
#include "src/comm/collectives.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

TEST(Comm, RanksAndTopology) {
  EXPECT_GE(world_size(), 2) << "run under mpirun -np 2 or more";
  EXPECT_GE(local_rank(), 0);
  EXPECT_LT(local_rank(), local_size());
  EXPECT_GE(num_nodes(), 1);
  std::string t = topology_summary();
  EXPECT_NE(t.find(std::to_string(world_size()) + " ranks"), std::string::npos) << t;
}

TEST(Comm, AllreduceAndBroadcastExact) {
  const int r = world_rank(), w = world_size();
  std::vector<float> f = {float(r), 1.f, float(2 * r + 1)};
  allreduce_sum(f.data(), f.size());
  EXPECT_EQ(f[0], float(w * (w - 1) / 2));
  EXPECT_EQ(f[1], float(w));
  EXPECT_EQ(f[2], float(w * w));
  double d[1] = {0.5 * r};
  allreduce_sum(d, 1);
  EXPECT_EQ(d[0], 0.25 * w * (w - 1));
  EXPECT_EQ(allreduce_max(r), w - 1);
  EXPECT_EQ(allreduce_min(r + 3), 3);
  std::string s = r == w - 1 ? "from the last rank" : "";
  broadcast(s, w - 1);
  EXPECT_EQ(s, "from the last rank");
}

TEST(GradSync, BucketedSumMatchesPlainSum) {
  const size_t n = 1000;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>((i % 17) + world_rank());
  auto comm = make_mpi_collectives();
  GradSyncOptions o;
  o.bucket_bytes = 96 * sizeof(float);
  auto sync = comm->make_grad_sync(g.data(), n, o);  // 11 buckets, the last one short
  EXPECT_EQ(sync->num_buckets(), 11u);
  // Readiness reported in decreasing offsets, as backward does.
  for (size_t off : {900u, 700u, 650u, 10u}) sync->on_ready(off);
  EXPECT_EQ(sync->counters().launched_in_backward, 10);  // all but the one starting at 0
  sync->finish();
  EXPECT_EQ(sync->counters().buckets, 11);
  const int w = world_size();
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(g[i], static_cast<float>(w * (i % 17) + w * (w - 1) / 2)) << "element " << i;
}

// Frozen parameters between trainable ones (GradSyncOptions::skip): no bucket covers them, so they are neither
// summed nor sent; the rest is summed as without them.
TEST(GradSync, SkippedRangesAreNeverSummed) {
  const size_t n = 1000;
  const std::vector<std::pair<size_t, size_t>> skip = {{100, 250}, {600, 601}, {990, 1000}};
  auto skipped = [&](size_t i) {
    for (const auto& [b, e] : skip)
      if (i >= b && i < e) return true;
    return false;
  };
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>((i % 17) + world_rank());
  auto comm = make_mpi_collectives();
  GradSyncOptions o;
  o.bucket_bytes = 96 * sizeof(float);
  o.skip = skip;
  auto sync = comm->make_grad_sync(g.data(), n, o);
  size_t covered = 0;
  for (size_t b = 0; b < sync->num_buckets(); ++b) {
    covered += sync->bucket_end(b) - sync->bucket_begin(b);
    for (size_t i = sync->bucket_begin(b); i < sync->bucket_end(b); ++i) ASSERT_FALSE(skipped(i)) << "bucket " << b;
    if (b > 0) {
      ASSERT_LE(sync->bucket_end(b), sync->bucket_begin(b - 1));
    }
  }
  EXPECT_EQ(covered, n - 150 - 1 - 10);
  for (size_t off : {900u, 500u, 10u}) sync->on_ready(off);
  sync->finish();
  const int w = world_size(), r = world_rank();
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(g[i], skipped(i) ? static_cast<float>((i % 17) + r) : static_cast<float>(w * (i % 17) + w * (w - 1) / 2))
        << "element " << i;
}

}  // namespace
}  // namespace cnn
