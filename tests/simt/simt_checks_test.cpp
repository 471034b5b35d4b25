// Planted bugs the emulator must catch, launch configuration checks, and the host runtime API.
#include <cmath>
#include <cstdlib>
#include <string>

#include "tests/simt/simt_test_util.h"
#include "tests/simt/test_kernels.h"

namespace {

std::string site(int line) { return "tests/simt/test_kernels.cu:" + std::to_string(line) + ":"; }

// The emulator's last error report names test_kernels.cu's `line` and contains `what`.
::testing::AssertionResult reported(int line, const std::string& what) {
  const std::string msg = simt::last_error_message();
  if (msg.find(site(line)) != std::string::npos && msg.find(what) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no '" << what << "' at " << site(line) << " in: " << msg;
}

// Tests that expect errors keep stderr quiet and leave no error behind for the next test.
class SimtChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    simt::set_schedule_seed(0);
    simt::set_quiet(true);
  }
  void TearDown() override {
    cudaGetLastError();
    cudaDeviceSynchronize();
    simt::set_quiet(false);
    simt::set_schedule_seed(0);
  }
};

TEST_F(SimtChecks, MissingBarrierInReductionGivesWrongResultsUnderSeededSchedules) {
  const int n = 128 * 9, grid = 3;
  const std::vector<float> x = random_floats(n, 21);
  std::vector<double> want(grid, 0.0);
  for (int i = 0; i < n; ++i) want[(i / 128) % grid] += x[i];
  DeviceArray<float> d_x(x), d_sums(grid);
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    simt::set_schedule_seed(seed);
    ASSERT_EQ(run_block_reduce(d_x.get(), n, d_sums.get(), grid, 128), cudaSuccess);
    EXPECT_TRUE(all_close(d_sums.download(), want, 1e-4, 1e-5)) << "correct kernel, seed " << seed;
    ASSERT_EQ(run_block_reduce_missing_sync(d_x.get(), n, d_sums.get(), grid), cudaSuccess);
    wrong += !all_close(d_sums.download(), want, 1e-4, 1e-5);
  }
  EXPECT_GT(wrong, 0) << "no seeded schedule exposed the missing __syncthreads";
}

TEST_F(SimtChecks, MissingBarrierThatIndexOrderHidesIsExposedBySeeds) {
  const int n = 200;
  const std::vector<float> x = random_floats(n, 22);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = i % 64 == 0 ? 0.0f : x[i - 1];
  DeviceArray<float> d_x(x), d_y(n);
  ASSERT_EQ(run_shift(d_x.get(), d_y.get(), n, false), cudaSuccess);
  EXPECT_EQ(d_y.download(), want) << "index order runs each thread to its end before the next one starts";
  int wrong = 0;
  std::vector<float> first_wrong;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    simt::set_schedule_seed(seed);
    ASSERT_EQ(run_shift(d_x.get(), d_y.get(), n, false), cudaSuccess);
    const std::vector<float> y = d_y.download();
    if (y != want && wrong++ == 0) first_wrong = y;
  }
  EXPECT_EQ(wrong, 3) << "every seeded schedule should break the racy shift";
  simt::set_schedule_seed(1);
  ASSERT_EQ(run_shift(d_x.get(), d_y.get(), n, false), cudaSuccess);
  const std::vector<float> again = d_y.download();
  ASSERT_EQ(again.size(), first_wrong.size());
  for (size_t i = 0; i < again.size(); ++i) {
    ASSERT_TRUE(again[i] == first_wrong[i] || (std::isnan(again[i]) && std::isnan(first_wrong[i])))
        << "a seed must reproduce its schedule, element " << i;
  }
}

TEST_F(SimtChecks, DivergentBarrierIsReportedWithItsLines) {
  DeviceArray<int> d_out(64);
  EXPECT_EQ(run_divergent_barrier(d_out.get()), cudaErrorLaunchFailure);
  const std::string msg = simt::last_error_message();
  EXPECT_NE(msg.find("divergent barrier"), std::string::npos) << msg;
  EXPECT_NE(msg.find(site(kDivergentBarrierLineA)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(kDivergentBarrierLineB)), std::string::npos) << msg;
  EXPECT_NE(msg.find("divergent_barrier_kernel"), std::string::npos) << msg;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << "a kernel fault surfaces at the next sync";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(SimtChecks, ThreadsExitingBeforeABarrierAreReported) {
  DeviceArray<int> d_out(64);
  EXPECT_EQ(run_early_exit_barrier(d_out.get()), cudaErrorLaunchFailure);
  EXPECT_TRUE(reported(kEarlyExitBarrierLine, "exited"));
}

TEST_F(SimtChecks, ShuffleMaskWithoutTheCallingLaneIsReported) {
  DeviceArray<float> d_out(32);
  for (uint64_t seed : {0, 1, 2}) {
    simt::set_schedule_seed(seed);
    EXPECT_EQ(run_bad_mask(d_out.get()), cudaErrorLaunchFailure);
    EXPECT_TRUE(reported(kBadMaskLine, "bad mask"));
  }
}

TEST_F(SimtChecks, SyncwarpMaskWithoutTheCallingLaneIsReported) {
  DeviceArray<int> d_out(32);
  EXPECT_EQ(run_syncwarp_bad_mask(d_out.get()), cudaErrorLaunchFailure);
  EXPECT_TRUE(reported(kSyncwarpBadMaskLine, "__syncwarp"));
}

TEST_F(SimtChecks, ShuffleSourcesOutsideTheMaskReadAsNaN) {
  DeviceArray<float> d_out(16);
  ASSERT_EQ(run_shuffle_outside_mask(d_out.get()), cudaSuccess) << simt::last_error_message();
  const std::vector<float> out = d_out.download();
  for (int lane = 0; lane < 8; ++lane) EXPECT_EQ(out[lane], 1.0f) << lane;
  for (int lane = 8; lane < 16; ++lane) EXPECT_TRUE(std::isnan(out[lane])) << lane;
}

TEST_F(SimtChecks, LanesPassingDifferentMasksAreReported) {
  DeviceArray<float> d_out(32);
  for (uint64_t seed : {0, 1, 2, 3}) {
    simt::set_schedule_seed(seed);
    EXPECT_EQ(run_mismatched_masks(d_out.get()), cudaErrorLaunchFailure) << "seed " << seed;
    EXPECT_TRUE(reported(kMismatchedMaskLine, "")) << "seed " << seed;
  }
}

TEST_F(SimtChecks, LanesOfTheMaskThatNeverArriveAreADeadlock) {
  DeviceArray<float> d_out(32);
  EXPECT_EQ(run_missing_lane(d_out.get()), cudaErrorLaunchFailure);
  EXPECT_TRUE(reported(kMissingLaneLine, "deadlock"));
}

TEST_F(SimtChecks, InvalidLaunchConfigurationsAreRejected) {
  DeviceArray<float> d_out(1);
  EXPECT_EQ(run_config(1, 1025, 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_NE(simt::last_error_message().find("1025 threads"), std::string::npos) << simt::last_error_message();
  EXPECT_EQ(run_config(1, dim3(32, 32, 2), 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run_config(1, dim3(1, 1, 65), 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run_config(1, dim3(0, 1, 1), 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run_config(dim3(1, 0, 1), 32, 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(run_config(dim3(1, 70000, 1), 32, 16, d_out.get()), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "CNN_LAUNCH hands configuration errors back itself";
  EXPECT_EQ(run_config(1, 1024, 16, d_out.get()), cudaSuccess);
  EXPECT_EQ(d_out.download()[0], 2.0f);
}

TEST_F(SimtChecks, DynamicSharedMemoryOverTheDefaultLimitNeedsOptIn) {
  DeviceArray<float> d_out(1);
  EXPECT_EQ(run_config(1, 32, 64 * 1024, d_out.get()), cudaErrorInvalidValue);
  EXPECT_NE(simt::last_error_message().find("cudaFuncAttributeMaxDynamicSharedMemorySize"), std::string::npos);
  EXPECT_EQ(opt_in_dynamic_shared(200 * 1024), cudaErrorInvalidValue);
  ASSERT_EQ(opt_in_dynamic_shared(64 * 1024), cudaSuccess);
  EXPECT_EQ(run_config(1, 32, 64 * 1024, d_out.get()), cudaSuccess) << simt::last_error_message();
  EXPECT_EQ(run_config(1, 32, 64 * 1024 + 4, d_out.get()), cudaErrorInvalidValue);
  ASSERT_EQ(opt_in_dynamic_shared(48 * 1024), cudaSuccess);
}

TEST_F(SimtChecks, TooMuchStaticSharedMemoryFailsTheLaunch) {
  DeviceArray<float> d_out(32);
  EXPECT_EQ(run_too_much_static_shared(d_out.get()), cudaErrorLaunchOutOfResources);
  EXPECT_NE(simt::last_error_message().find("static shared memory"), std::string::npos);
}

TEST_F(SimtChecks, FiberStackOverflowIsReportedNotSilent) {
  DeviceArray<float> d_out(32);
  ASSERT_EQ(run_stack_overflow(d_out.get(), 10), cudaSuccess);
  EXPECT_EQ(d_out.download()[0], 66.0f);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_stack_overflow(d_out.get(), 1000), "stack overflow in emulated CUDA thread \\(0,0,0\\)");
}

// Only an AddressSanitizer build (make test-simt-asan) can see a read past a cudaMalloc allocation.
TEST_F(SimtChecks, OutOfBoundsReadOfDeviceMemoryUnderAddressSanitizer) {
#if defined(__SANITIZE_ADDRESS__)
  DeviceArray<float> d_x(std::vector<float>(100, 1.0f)), d_y(100);
  ASSERT_EQ(run_out_of_bounds(d_x.get(), d_y.get(), 100, 100), cudaSuccess);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_out_of_bounds(d_x.get(), d_y.get(), 100, 128),
               "heap-buffer-overflow(.|\n)*test_kernels.cu:" + std::to_string(kOutOfBoundsLine));
#else
  GTEST_SKIP() << "needs -fsanitize=address (make test-simt-asan)";
#endif
}

TEST_F(SimtChecks, UninitialisedDeviceAndSharedMemoryReadsAsNaN) {
  const int n = 300;
  DeviceArray<float> d_x(n), d_y(n);
  for (float v : d_x.download()) ASSERT_TRUE(std::isnan(v));
  DeviceArray<double> d_d(4);
  for (double v : d_d.download()) ASSERT_TRUE(std::isnan(v));
  d_y.fill_bytes(0);
  ASSERT_EQ(run_saxpy(n, 2.0f, d_x.get(), d_y.get(), 2, 64), cudaSuccess);
  for (float v : d_y.download()) ASSERT_TRUE(std::isnan(v)) << "a kernel reading unwritten memory must see NaN";
  DeviceArray<float> d_s(96);
  ASSERT_EQ(run_read_uninit_shared(d_s.get(), 96), cudaSuccess);
  for (float v : d_s.download()) ASSERT_TRUE(std::isnan(v)) << "unwritten shared memory must read as NaN";
}

TEST_F(SimtChecks, MemcpyMemsetStreamsAndEvents) {
  const size_t n = 1000;
  const std::vector<float> x = random_floats(n, 23);
  DeviceArray<float> d_a(n), d_b(n);
  cudaStream_t stream;
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d_a.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d_b.get(), d_a.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d_a.get(), 0, n * sizeof(float), stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, stop), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(d_b.download(), x);
  EXPECT_EQ(d_a.download(), std::vector<float>(n, 0.0f));

  // Ranges outside an allocation, and host pointers passed as device pointers, are refused.
  EXPECT_EQ(cudaMemcpy(d_a.get() + 1, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_NE(simt::last_error_message().find("not inside one cudaMalloc allocation"), std::string::npos);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), x.data(), n * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host.data(), 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);

  EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// CNNTRAIN_SIMT_SEED is read at start-up, so the check runs in a freshly executed child process.
TEST(SimtEnvironment, ScheduleSeedComesFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("CNNTRAIN_SIMT_SEED", "12345", 1);
  EXPECT_EXIT(std::exit(simt::schedule_seed() == 12345 ? 0 : 1), ::testing::ExitedWithCode(0), "");
  unsetenv("CNNTRAIN_SIMT_SEED");
}

TEST_F(SimtChecks, DeviceQueriesDescribeThePortableLimits) {
  int count = 0, device = -1, smem = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  ASSERT_EQ(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
  EXPECT_EQ(smem, 166912);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorLaunchFailure), "cudaErrorLaunchFailure");
}

}  // namespace
