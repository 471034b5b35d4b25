// The emulator's nvcuda::wmma (kernels/simt/simt_wmma.h): results against a CPU product of the same 16-bit
// values (exact products, fp32 sums: within fp32 rounding of the sum), row- and column-major operands, padded
// leading dimensions, element-wise access to accumulator fragments, under the fixed and scrambled fragment
// mappings, and the planted misuse it must report (a kernel indexing fragment elements fails when scrambled).
#include <cstdlib>
#include <string>

#include "tests/simt/simt_test_util.h"
#include "tests/simt/wmma_kernels.h"

namespace {

template <class T>
std::vector<T> to_half(const std::vector<float>& x) {
  std::vector<T> h;
  for (float v : x) h.push_back(T(v));
  return h;
}

template <class T>
void check_mma() {
  // a: 16x16 row-major; b: column-major with ldm 24, element (k, n) at b[n * 24 + k].
  const std::vector<T> a = to_half<T>(random_floats(256, 1)), b = to_half<T>(random_floats(16 * 24, 2));
  const std::vector<float> c = random_floats(256, 3);
  std::vector<double> want(256);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double acc = c[m * 16 + n];
      for (int k = 0; k < 16; ++k) acc += double(float(a[m * 16 + k])) * double(float(b[n * 24 + k]));
      want[m * 16 + n] = acc;
    }
  DeviceArray<T> d_a(a), d_b(b);
  DeviceArray<float> d_c(c), d_d(256);
  for (bool scramble : {false, true})
    for (uint64_t seed : {0, 5}) {
      simt::set_wmma_scramble(scramble);
      simt::set_schedule_seed(seed);
      ASSERT_EQ(run_wmma_mma(d_a.get(), d_b.get(), d_c.get(), d_d.get()), cudaSuccess) << simt::last_error_message();
      EXPECT_TRUE(all_close(d_d.download(), want, 1e-5, 1e-5)) << "scramble " << scramble << ", seed " << seed;
    }
}

// Every test leaves the default schedule and the fixed fragment mapping behind.
class SimtWmma : public ::testing::Test {
 protected:
  void TearDown() override {
    simt::set_wmma_scramble(false);
    simt::set_schedule_seed(0);
  }
};

TEST_F(SimtWmma, HalfProductMatchesTheCpu) { check_mma<__half>(); }
TEST_F(SimtWmma, Bfloat16ProductMatchesTheCpu) { check_mma<__nv_bfloat16>(); }

TEST_F(SimtWmma, TwoWarpsFillScaleAndStoreTheirTiles) {
  const std::vector<__half> a = to_half<__half>(random_floats(256, 4)), b = to_half<__half>(random_floats(512, 5));
  std::vector<double> want(512);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 32; ++n) {
      double acc = 0;
      for (int k = 0; k < 16; ++k) acc += double(float(a[m * 16 + k])) * double(float(b[k * 32 + n]));
      want[m * 32 + n] = 0.5 * acc;
    }
  DeviceArray<__half> d_a(a), d_b(b);
  DeviceArray<float> d_d(512);
  for (bool scramble : {false, true}) {
    simt::set_wmma_scramble(scramble);
    ASSERT_EQ(run_wmma_two_tiles(d_a.get(), d_b.get(), 0.5f, d_d.get()), cudaSuccess) << simt::last_error_message();
    EXPECT_TRUE(all_close(d_d.download(), want, 1e-5, 1e-5)) << "scramble " << scramble;
  }
}

// Element-wise code that assumes which tile element acc.x[i] is passes under the fixed mapping it was written
// against and fails under every scrambled one; each launch draws a mapping of its own.
TEST_F(SimtWmma, IndexingFragmentElementsFailsUnderScrambledMappings) {
  const std::vector<__half> a = to_half<__half>(random_floats(256, 6)), b = to_half<__half>(random_floats(256, 7));
  const std::vector<float> bias = random_floats(16, 8);
  std::vector<double> want(256);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double acc = bias[n];
      for (int k = 0; k < 16; ++k) acc += double(float(a[m * 16 + k])) * double(float(b[k * 16 + n]));
      want[m * 16 + n] = acc;
    }
  DeviceArray<__half> d_a(a), d_b(b);
  DeviceArray<float> d_bias(bias), d_d(256);
  ASSERT_EQ(run_wmma_indexed_bias(d_a.get(), d_b.get(), d_bias.get(), d_d.get()), cudaSuccess);
  EXPECT_TRUE(all_close(d_d.download(), want, 1e-5, 1e-5)) << "the planted kernel matches the fixed mapping";
  simt::set_wmma_scramble(true);
  std::vector<std::vector<float>> results;
  for (uint64_t seed : {0, 1, 2}) {
    simt::set_schedule_seed(seed);
    for (int launch = 0; launch < 2; ++launch) {
      ASSERT_EQ(run_wmma_indexed_bias(d_a.get(), d_b.get(), d_bias.get(), d_d.get()), cudaSuccess);
      results.push_back(d_d.download());
      EXPECT_FALSE(all_close(results.back(), want, 1e-5, 1e-5)) << "seed " << seed << ", launch " << launch;
    }
  }
  EXPECT_NE(results[0], results[1]) << "successive launches should draw different mappings";
}

std::string site(int line) { return "tests/simt/wmma_kernels.cu:" + std::to_string(line) + ":"; }

class SimtWmmaChecks : public ::testing::Test {
 protected:
  void SetUp() override { simt::set_quiet(true); }
  void TearDown() override {
    cudaGetLastError();
    cudaDeviceSynchronize();
    simt::set_quiet(false);
  }
  DeviceArray<__half> a_{std::vector<__half>(512, __half(1.0f))};
  DeviceArray<float> d_{256};
};

TEST_F(SimtWmmaChecks, MisalignedPointerIsReported) {
  EXPECT_EQ(run_wmma_misaligned(a_.get(), d_.get()), cudaErrorMisalignedAddress);
  const std::string msg = simt::last_error_message();
  EXPECT_NE(msg.find(site(kWmmaMisalignedLine)), std::string::npos) << msg;
  EXPECT_NE(msg.find("32-byte"), std::string::npos) << msg;
}

TEST_F(SimtWmmaChecks, LeadingDimensionNotAMultipleOf16BytesIsReported) {
  EXPECT_EQ(run_wmma_bad_ldm(a_.get(), d_.get()), cudaErrorMisalignedAddress);
  const std::string msg = simt::last_error_message();
  EXPECT_NE(msg.find(site(kWmmaBadLdmLine)), std::string::npos) << msg;
  EXPECT_NE(msg.find("ldm 12"), std::string::npos) << msg;
}

TEST_F(SimtWmmaChecks, HalfAWarpCallingMmaIsReported) {
  for (uint64_t seed : {0, 1, 2}) {
    simt::set_schedule_seed(seed);
    EXPECT_EQ(run_wmma_divergent(a_.get(), d_.get()), cudaErrorLaunchFailure);
    const std::string msg = simt::last_error_message();
    EXPECT_NE(msg.find("divergent wmma"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line " + std::to_string(kWmmaDivergentLine)), std::string::npos) << msg;
  }
  simt::set_schedule_seed(0);
}

// CNNTRAIN_SIMT_WMMA_SCRAMBLE is read at start-up, so the check runs in a freshly executed child process.
TEST(SimtEnvironment, WmmaScrambleComesFromTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("CNNTRAIN_SIMT_WMMA_SCRAMBLE", "1", 1);
  EXPECT_EXIT(std::exit(simt::wmma_scramble() ? 0 : 1), ::testing::ExitedWithCode(0), "");
  unsetenv("CNNTRAIN_SIMT_WMMA_SCRAMBLE");
}

}  // namespace
