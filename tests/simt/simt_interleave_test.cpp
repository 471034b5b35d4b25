// Interleaved blocks (simt::set_resident_blocks): planted races between blocks give wrong results there and
// right ones when blocks run one after another, so the mode is what catches them; correct kernels that
// share data between blocks stay right.
#include <cmath>
#include <cstdlib>

#include "tests/simt/grid_kernels.h"
#include "tests/simt/simt_test_util.h"

namespace {

class SimtInterleave : public ::testing::Test {
 protected:
  void TearDown() override {
    simt::set_resident_blocks(1);
    simt::set_schedule_seed(0);
  }
  // Runs `launch` under seeds 0..7 (0: blocks in turn) with `resident` blocks at a time and counts the
  // runs whose result `right` rejects.
  template <class Launch, class Right>
  int wrong_runs(int resident, Launch launch, Right right) {
    simt::set_resident_blocks(resident);
    int wrong = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      simt::set_schedule_seed(seed);
      EXPECT_EQ(launch(), cudaSuccess) << simt::last_error_message();
      wrong += !right();
    }
    return wrong;
  }
};

TEST_F(SimtInterleave, NonAtomicUpdateAcrossBlocksLosesUpdates) {
  const int grid = 12;
  DeviceArray<int> d_counter(1);
  const auto launch = [&] {
    d_counter.fill_bytes(0);
    return run_racy_block_count(d_counter.get(), grid);
  };
  const auto right = [&] { return d_counter.download()[0] == grid; };
  EXPECT_EQ(wrong_runs(1, launch, right), 0) << "blocks one after another cannot lose an update";
  EXPECT_GT(wrong_runs(4, launch, right), 0) << "no interleaved schedule lost an update";
}

TEST_F(SimtInterleave, LastBlockReadingPartialsBeforeTheyArePublished) {
  const int n = 64 * 40 + 17, grid = 16;
  const std::vector<float> x = random_floats(n, 31);
  double want = 0;
  for (float v : x) want += v;
  DeviceArray<float> d_x(x), d_partial(grid), d_out(1);
  DeviceArray<unsigned> d_done(1);
  d_done.fill_bytes(0);
  for (bool claim_first : {false, true}) {
    const auto launch = [&] {
      d_partial.fill_bytes(0xFF);  // NaN: a partial read before it is written shows
      return run_last_block_sum(d_x.get(), n, d_partial.get(), d_done.get(), d_out.get(), grid, claim_first);
    };
    const auto right = [&] { return std::fabs(d_out.download()[0] - want) <= 1e-4; };
    EXPECT_EQ(wrong_runs(1, launch, right), 0) << "blocks one after another, claim_first " << claim_first;
    const int wrong = wrong_runs(4, launch, right);
    if (claim_first) {
      EXPECT_GT(wrong, 0) << "no interleaved schedule read a partial before it was written";
    } else {
      EXPECT_EQ(wrong, 0) << "publishing before taking the ticket is correct";
    }
    EXPECT_EQ(d_done.download()[0], 0u) << "the last block resets the ticket counter";
  }
}

TEST_F(SimtInterleave, SeedReproducesTheInterleaving) {
  const int grid = 12;
  DeviceArray<int> d_counter(1);
  simt::set_resident_blocks(4);
  std::vector<int> counts;
  for (int run = 0; run < 2; ++run) {
    simt::set_schedule_seed(7);
    for (int launch = 0; launch < 3; ++launch) {
      d_counter.fill_bytes(0);
      ASSERT_EQ(run_racy_block_count(d_counter.get(), grid), cudaSuccess);
      counts.push_back(d_counter.download()[0]);
    }
  }
  EXPECT_EQ(std::vector<int>(counts.begin(), counts.begin() + 3), std::vector<int>(counts.begin() + 3, counts.end()));
}

// CNNTRAIN_SIMT_RESIDENT_BLOCKS is read at start-up, so the check runs in a freshly executed child process.
TEST(SimtEnvironment, ResidentBlocksComeFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("CNNTRAIN_SIMT_RESIDENT_BLOCKS", "4", 1);
  EXPECT_EXIT(std::exit(simt::resident_blocks() == 4 ? 0 : 1), ::testing::ExitedWithCode(0), "");
  setenv("CNNTRAIN_SIMT_RESIDENT_BLOCKS", "1000", 1);
  EXPECT_EXIT(std::exit(simt::resident_blocks() == 32 ? 0 : 1), ::testing::ExitedWithCode(0), "");
  unsetenv("CNNTRAIN_SIMT_RESIDENT_BLOCKS");
}

}  // namespace
