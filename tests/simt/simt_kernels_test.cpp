// Correct kernels give correct results under the emulator, with the default schedule and three seeded
// reordering schedules, each also with four blocks resident at once and their threads interleaved.
#include <algorithm>
#include <climits>
#include <string>

#include "tests/simt/simt_test_util.h"
#include "tests/simt/test_kernels.h"

namespace {

struct Schedule {
  uint64_t seed;
  int resident;  // blocks resident at once, their threads interleaved when > 1
};

class SimtSchedule : public ::testing::TestWithParam<Schedule> {
 protected:
  void SetUp() override {
    simt::set_schedule_seed(GetParam().seed);
    simt::set_resident_blocks(GetParam().resident);
    bytes_before_ = simt::device_bytes_in_use();
  }
  void TearDown() override {
    EXPECT_EQ(simt::device_bytes_in_use(), bytes_before_) << "device memory leaked";
    simt::set_schedule_seed(0);
    simt::set_resident_blocks(1);
  }
  size_t bytes_before_ = 0;
};

TEST_P(SimtSchedule, SharedMemoryBlockReduction) {
  const int n = 10007, grid = 7;
  const std::vector<float> x = random_floats(n, 1);
  DeviceArray<float> d_x(x);
  for (int block : {64, 128, 256}) {
    DeviceArray<float> d_sums(grid);
    ASSERT_EQ(run_block_reduce(d_x.get(), n, d_sums.get(), grid, block), cudaSuccess) << simt::last_error_message();
    std::vector<double> want(grid, 0.0);
    for (int i = 0; i < n; ++i) want[(i / block) % grid] += x[i];
    EXPECT_TRUE(all_close(d_sums.download(), want, 1e-4, 1e-5)) << "block " << block;
  }
}

TEST_P(SimtSchedule, WarpShuffleReduction) {
  const int n = 5003;
  const std::vector<float> x = random_floats(n, 2);
  DeviceArray<float> d_x(x), d_out(1);
  d_out.fill_bytes(0);
  ASSERT_EQ(run_warp_reduce(d_x.get(), n, d_out.get(), 3, 96), cudaSuccess) << simt::last_error_message();
  double want = 0;
  for (float v : x) want += v;
  EXPECT_TRUE(all_close(d_out.download(), std::vector<double>{want}, 1e-3, 1e-5));
}

TEST_P(SimtSchedule, WarpButterflyAllReduceWithWidths) {
  const int n = 300;
  const std::vector<float> x = random_floats(n, 3);
  DeviceArray<float> d_x(x), d_y(n);
  for (int width : {32, 16, 8}) {
    ASSERT_EQ(run_warp_allreduce(d_x.get(), d_y.get(), n, width), cudaSuccess) << simt::last_error_message();
    std::vector<double> want(n, 0.0);
    for (int i = 0; i < n; ++i) {
      const int start = i / width * width;
      for (int j = start; j < std::min(start + width, n); ++j) want[i] += x[j];
    }
    EXPECT_TRUE(all_close(d_y.download(), want, 1e-5, 1e-5)) << "width " << width;
  }
}

TEST_P(SimtSchedule, WarpScanAndBroadcastWithRaggedTail) {
  const int n = 77;
  const std::vector<int> x = random_ints(n, -9, 9, 4);
  DeviceArray<int> d_x(x), d_y(n), d_first(n);
  for (int width : {32, 8}) {
    ASSERT_EQ(run_warp_scan(d_x.get(), d_y.get(), d_first.get(), n, width), cudaSuccess)
        << simt::last_error_message();
    std::vector<int> scan(n), first(n);
    for (int i = 0; i < n; ++i) {
      const int start = i / width * width;
      scan[i] = (i == start ? 0 : scan[i - 1]) + x[i];
      first[i] = x[start];
    }
    EXPECT_EQ(d_y.download(), scan) << "width " << width;
    EXPECT_EQ(d_first.download(), first) << "width " << width;
  }
}

TEST_P(SimtSchedule, BallotAnyAll) {
  const int n = 77;  // warp 0 all set, warp 1 mixed, warp 2 (13 lanes) all clear
  std::vector<int> x(n, 0);
  std::fill(x.begin(), x.begin() + 32, 1);
  const std::vector<int> mixed = random_ints(32, 0, 1, 5);
  std::copy(mixed.begin(), mixed.end(), x.begin() + 32);
  DeviceArray<int> d_x(x), d_any(3), d_all(3);
  DeviceArray<unsigned> d_ballot(3);
  ASSERT_EQ(run_votes(d_x.get(), n, d_ballot.get(), d_any.get(), d_all.get()), cudaSuccess)
      << simt::last_error_message();
  std::vector<unsigned> ballot(3, 0);
  for (int i = 0; i < n; ++i) ballot[i / 32] |= static_cast<unsigned>(x[i] != 0) << (i % 32);
  EXPECT_EQ(d_ballot.download(), ballot);
  EXPECT_EQ(d_any.download(), (std::vector<int>{1, ballot[1] != 0, 0}));
  EXPECT_EQ(d_all.download(), (std::vector<int>{1, ballot[1] == ~0u, 0}));
}

TEST_P(SimtSchedule, SyncthreadsCountAndOr) {
  const int n = 300, grid = 3, block = 128;  // block 2 holds only 44 inputs, all zero
  std::vector<int> x = random_ints(n, 0, 1, 6);
  std::fill(x.begin(), x.begin() + 128, 1);
  std::fill(x.begin() + 256, x.end(), 0);
  DeviceArray<int> d_x(x), d_counts(grid * 3);
  ASSERT_EQ(run_block_votes(d_x.get(), n, d_counts.get(), grid, block), cudaSuccess) << simt::last_error_message();
  std::vector<int> want;
  for (int b = 0; b < grid; ++b) {
    int count = 0;
    for (int i = b * block; i < std::min(n, (b + 1) * block); ++i) count += x[i] != 0;
    want.insert(want.end(), {count, count == block, count > 0});
  }
  EXPECT_EQ(d_counts.download(), want);
}

TEST_P(SimtSchedule, IntegerAndFloatAtomics) {
  const int n = 4099, nbins = 10;
  const std::vector<int> x = random_ints(n, -50, 50, 7);
  DeviceArray<int> d_x(x), d_hist(nbins), d_imax(std::vector<int>{INT_MIN}), d_imin(std::vector<int>{INT_MAX}),
      d_owner(std::vector<int>{-1}), d_exch(std::vector<int>{0});
  DeviceArray<float> d_fsum(std::vector<float>{0.0f});
  DeviceArray<double> d_dsum(std::vector<double>{0.0});
  DeviceArray<unsigned> d_count(std::vector<unsigned>{0});
  d_hist.fill_bytes(0);
  const AtomicOut out{d_hist.get(), d_fsum.get(), d_dsum.get(), d_imax.get(),
                      d_imin.get(), d_count.get(), d_owner.get(), d_exch.get()};
  ASSERT_EQ(run_atomics(d_x.get(), n, nbins, out, 5, 64), cudaSuccess) << simt::last_error_message();
  std::vector<int> hist(nbins, 0);
  long sum = 0;
  for (int v : x) {
    ++hist[((v % nbins) + nbins) % nbins];
    sum += v;
  }
  EXPECT_EQ(d_hist.download(), hist);
  EXPECT_EQ(d_fsum.download()[0], static_cast<float>(sum));  // small integers: exact in any order
  EXPECT_EQ(d_dsum.download()[0], static_cast<double>(sum));
  EXPECT_EQ(d_imax.download()[0], *std::max_element(x.begin(), x.end()));
  EXPECT_EQ(d_imin.download()[0], *std::min_element(x.begin(), x.end()));
  EXPECT_EQ(d_count.download()[0], static_cast<unsigned>(n));
  const int owner = d_owner.download()[0];
  EXPECT_TRUE(owner >= 0 && owner < n) << owner;
  EXPECT_EQ(d_exch.download()[0], 7);
}

TEST_P(SimtSchedule, DynamicSharedMemory) {
  const int n = 1000, block = 96;
  const std::vector<float> x = random_floats(n, 8);
  DeviceArray<float> d_x(x), d_y(n);
  ASSERT_EQ(run_reverse_dynamic(d_x.get(), d_y.get(), n, block, block * sizeof(float)), cudaSuccess)
      << simt::last_error_message();
  std::vector<float> want(n);
  for (int base = 0; base < n; base += block) {
    const int count = std::min(block, n - base);
    for (int t = 0; t < count; ++t) want[base + t] = x[base + count - 1 - t];
  }
  EXPECT_EQ(d_y.download(), want);
}

TEST_P(SimtSchedule, MultiDimensionalGridCoversEveryThreadOnce) {
  const dim3 grid(3, 2, 2), block(8, 4, 2);
  const size_t total = 3 * 2 * 2 * 8 * 4 * 2;
  DeviceArray<unsigned> d_out(total);
  d_out.fill_bytes(0);
  ASSERT_EQ(run_index3d(d_out.get(), grid, block), cudaSuccess) << simt::last_error_message();
  EXPECT_EQ(d_out.download(), std::vector<unsigned>(total, 1u));
}

TEST_P(SimtSchedule, GridStrideLoop) {
  const int n = 100003;
  const std::vector<float> x = random_floats(n, 9), y = random_floats(n, 10);
  DeviceArray<float> d_x(x), d_y(y);
  ASSERT_EQ(run_saxpy(n, 0.5f, d_x.get(), d_y.get(), 5, 128), cudaSuccess) << simt::last_error_message();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = 0.5f * x[i] + y[i];
  EXPECT_TRUE(all_close(d_y.download(), want, 1e-6, 1e-6));
}

TEST_P(SimtSchedule, DeviceHelperWithStaticSharedAndShuffles) {
  const int n = 1000, block = 160;
  const std::vector<float> x = random_floats(n, 11);
  DeviceArray<float> d_x(x), d_y(n);
  ASSERT_EQ(run_block_sum_helper(d_x.get(), d_y.get(), n, block), cudaSuccess) << simt::last_error_message();
  std::vector<double> want(n);
  for (int base = 0; base < n; base += block) {
    double s = 0;
    for (int i = base; i < std::min(n, base + block); ++i) s += x[i];
    for (int i = base; i < std::min(n, base + block); ++i) want[i] = s;
  }
  EXPECT_TRUE(all_close(d_y.download(), want, 1e-4, 1e-5));
}

TEST_P(SimtSchedule, ShiftThroughSharedMemoryWithBarrier) {
  const int n = 200;
  const std::vector<float> x = random_floats(n, 12);
  DeviceArray<float> d_x(x), d_y(n);
  ASSERT_EQ(run_shift(d_x.get(), d_y.get(), n, true), cudaSuccess) << simt::last_error_message();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = i % 64 == 0 ? 0.0f : x[i - 1];
  EXPECT_EQ(d_y.download(), want);
}

TEST_P(SimtSchedule, SyncwarpExchangeAndEightByteShuffles) {
  const int n = 150;
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1.0 / (i + 1);
  DeviceArray<double> d_x(x), d_swapped(n), d_rotated(n);
  DeviceArray<long long> d_down(n);
  ASSERT_EQ(run_warp_exchange(d_x.get(), d_swapped.get(), d_rotated.get(), d_down.get(), n), cudaSuccess)
      << simt::last_error_message();
  std::vector<double> swapped(n), rotated(n);
  std::vector<long long> down(n);
  const auto at = [&](int i) { return i < n ? x[i] : 0.0; };
  for (int i = 0; i < n; ++i) {
    swapped[i] = at(i ^ 1);
    rotated[i] = at(i / 32 * 32 + (i % 32 + 5) % 32);
    down[i] = static_cast<long long>(i % 32 == 31 ? i : i + 1) << 33;
  }
  EXPECT_EQ(d_swapped.download(), swapped);
  EXPECT_EQ(d_rotated.download(), rotated);
  EXPECT_EQ(d_down.download(), down);
}

INSTANTIATE_TEST_SUITE_P(DefaultSeededAndInterleaved, SimtSchedule,
                         ::testing::Values(Schedule{0, 1}, Schedule{1, 1}, Schedule{2, 1}, Schedule{3, 1},
                                           Schedule{0, 4}, Schedule{1, 4}, Schedule{2, 4}, Schedule{3, 4}),
                         [](const ::testing::TestParamInfo<Schedule>& info) {
                           const Schedule& s = info.param;
                           const std::string order = s.seed == 0 ? "default" : "seed" + std::to_string(s.seed);
                           return s.resident == 1 ? order : order + "_blocks" + std::to_string(s.resident);
                         });

TEST(SimtReducedPrecision, HalfAndBfloat16RoundToNearestEven) {
  const float nan = std::nanf("");
  const std::vector<float> x = {1.0f,   -2.0f,  0.1f,   1.0f / 3, 65504.0f, 65519.0f, 65520.0f, 3e-8f,
                                1e-8f,  -0.0f,  nan,    3.14159265f, 1.00048828125f, 1.00146484375f};
  const std::vector<unsigned short> half = {0x3C00, 0xC000, 0x2E66, 0x3555, 0x7BFF, 0x7BFF, 0x7C00,
                                            0x0001, 0x0000, 0x8000, 0x7E00, 0x4248, 0x3C00, 0x3C02};
  const std::vector<unsigned short> bf16 = {0x3F80, 0xC000, 0x3DCD, 0x3EAB, 0x4780, 0x4780, 0x4780,
                                            0x3301, 0x322C, 0x8000, 0x7FC0, 0x4049, 0x3F80, 0x3F80};
  const int n = static_cast<int>(x.size());
  DeviceArray<float> d_x(x), d_back(2 * n);
  DeviceArray<unsigned short> d_half(n), d_bf16(n);
  ASSERT_EQ(run_reduced_precision(d_x.get(), d_half.get(), d_bf16.get(), d_back.get(), n), cudaSuccess);
  EXPECT_EQ(d_half.download(), half);
  EXPECT_EQ(d_bf16.download(), bf16);
  const std::vector<float> back = d_back.download();
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2 * 4], 65504.0f);
  EXPECT_TRUE(std::isinf(back[2 * 6]));
  EXPECT_EQ(back[2 * 7], 1.0f / 16777216);
  EXPECT_TRUE(std::isnan(back[2 * 10]) && std::isnan(back[2 * 10 + 1]));
  EXPECT_EQ(back[2 * 11 + 1], 3.140625f);
}

TEST(SimtContexts, UcontextFallbackGivesTheSameResults) {
  const int n = 3001, grid = 4;
  const std::vector<float> x = random_floats(n, 13);
  DeviceArray<float> d_x(x), d_a(grid), d_b(grid);
  ASSERT_EQ(run_block_reduce(d_x.get(), n, d_a.get(), grid, 128), cudaSuccess);
  simt::set_context_kind(simt::ContextKind::kUcontext);
  const cudaError_t e = run_block_reduce(d_x.get(), n, d_b.get(), grid, 128);
  simt::set_context_kind(simt::ContextKind::kAsm);
  ASSERT_EQ(e, cudaSuccess) << simt::last_error_message();
  EXPECT_EQ(d_a.download(), d_b.download());
}

}  // namespace
