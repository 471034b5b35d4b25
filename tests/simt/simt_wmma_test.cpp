// The emulator's nvcuda::wmma (kernels/simt/simt_wmma.h): results against a CPU product of the same 16-bit
// values (exact products, fp32 sums: within fp32 rounding of the sum), row- and column-major operands, padded
// leading dimensions, element-wise access to accumulator fragments, and the planted misuse it must report.
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
  for (uint64_t seed : {0, 5}) {
    simt::set_schedule_seed(seed);
    ASSERT_EQ(run_wmma_mma(d_a.get(), d_b.get(), d_c.get(), d_d.get()), cudaSuccess) << simt::last_error_message();
    EXPECT_TRUE(all_close(d_d.download(), want, 1e-5, 1e-5));
  }
  simt::set_schedule_seed(0);
}

TEST(SimtWmma, HalfProductMatchesTheCpu) { check_mma<__half>(); }
TEST(SimtWmma, Bfloat16ProductMatchesTheCpu) { check_mma<__nv_bfloat16>(); }

TEST(SimtWmma, TwoWarpsFillScaleAndStoreTheirTiles) {
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
  ASSERT_EQ(run_wmma_two_tiles(d_a.get(), d_b.get(), 0.5f, d_d.get()), cudaSuccess) << simt::last_error_message();
  EXPECT_TRUE(all_close(d_d.download(), want, 1e-5, 1e-5));
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

}  // namespace
