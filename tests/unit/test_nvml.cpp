// The NVML loader and the GPU sampler against the test-only fake NVML (tests/obs/fake_nvml.c, built beside this
// binary): the real dlopen/dlsym path, device lookup by index and by PCI bus id, the figures and their units,
// per-window averaging, every way NVML can be missing or fail, and the GPU arrays of the ranks event.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "src/obs/nvml.h"
#include "src/obs/rank_report.h"

namespace cnn {
namespace {

// The fake library sits beside the test binary (src/obs/obs.mk builds both into $(BUILD)/tests).
std::string fake_nvml() {
  char exe[4096] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string(".");
  return dir.substr(0, dir.rfind('/')) + "/libfake-nvml.so";
}

std::unique_ptr<NvmlDevice> open_fake(const std::string& bus_id, unsigned index, std::string* why) {
  return NvmlDevice::open(fake_nvml(), bus_id, index, why);
}

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(Nvml, ReadsTheDeviceByIndexInBaseUnits) {
  std::string why;
  auto d = open_fake("", 1, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->name(), "Fake NVML GPU 1");
  const GpuFigures a = d->read(&why), b = d->read(&why);
  EXPECT_EQ(why, "");
  // Device 1's first and second readings (fake_nvml.c): power from milliwatts to watts.
  EXPECT_EQ(a.util_pct, 31);
  EXPECT_EQ(b.util_pct, 51);
  EXPECT_EQ(a.mem_used, 2 * kGiB);
  EXPECT_EQ(b.mem_used, 2.5 * kGiB);
  EXPECT_EQ(a.mem_total, 16 * kGiB);
  EXPECT_EQ(a.temp_c, 61);
  EXPECT_EQ(a.power_w, 151);
  EXPECT_EQ(b.power_w, 161);
}

TEST(Nvml, FindsTheDeviceByPciBusIdAsCudaReportsIt) {
  std::string why;
  auto d = open_fake("0000:01:00.0", 0, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->name(), "Fake NVML GPU 1");
  EXPECT_FALSE(open_fake("0000:07:00.0", 0, &why));
  EXPECT_EQ(why, "nvmlDeviceGetHandleByPciBusId_v2(\"0000:07:00.0\") failed: Not Found");
  EXPECT_FALSE(open_fake("", 9, &why));
  EXPECT_EQ(why, "nvmlDeviceGetHandleByIndex_v2(9) failed: Invalid Argument");
}

TEST(Nvml, AMissingLibraryIsAReasonNotAnError) {
  std::string why;
  EXPECT_FALSE(NvmlDevice::open("libnvidia-ml-absent.so.1", "", 0, &why));
  EXPECT_NE(why.find("libnvidia-ml-absent.so.1 could not be loaded ("), std::string::npos) << why;
  EXPECT_NE(why.find("it ships with the NVIDIA driver"), std::string::npos) << why;
}

TEST(Nvml, ALibraryWithoutTheEntryPointsIsNamed) {
  std::string why;
  EXPECT_FALSE(NvmlDevice::open("libm.so.6", "", 0, &why));
  EXPECT_EQ(why, "libm.so.6 has no nvmlInit_v2 (not an NVML library, or too old a driver)");
}

TEST(Nvml, InitFailureCarriesNvmlsMessage) {
  ::setenv("FAKE_NVML_INIT_ERROR", "6", 1);
  std::string why;
  EXPECT_FALSE(open_fake("", 0, &why));
  ::unsetenv("FAKE_NVML_INIT_ERROR");
  EXPECT_EQ(why, "nvmlInit_v2 failed: Not Found");
  // Nothing was left initialised: the next open starts from a clean library.
  EXPECT_TRUE(open_fake("", 0, &why)) << why;
}

TEST(Nvml, AnUnsupportedQueryLeavesOnlyThatFigureOut) {
  ::setenv("FAKE_NVML_NO_POWER", "1", 1);
  std::string why;
  auto d = open_fake("", 0, &why);
  ASSERT_TRUE(d) << why;
  GpuSampler s(std::move(d), 0);
  s.sample_now();
  const GpuFigures f = s.take();
  ::unsetenv("FAKE_NVML_NO_POWER");
  EXPECT_TRUE(std::isnan(f.power_w));
  EXPECT_EQ(f.util_pct, 30);
  EXPECT_EQ(s.take_problem(), "nvmlDeviceGetPowerUsage: Not Supported");
  EXPECT_EQ(s.take_problem(), "") << "reported once";
}

TEST(GpuSampler, AveragesPerWindowAndKeepsTheLatestForAnEmptyWindow) {
  std::string why;
  auto d = open_fake("", 0, &why);
  ASSERT_TRUE(d) << why;
  GpuSampler s(std::move(d), 0);
  const GpuFigures none = s.take();
  for (int i = 0; i < kNumGpuFigures; ++i) EXPECT_TRUE(std::isnan(gpu_figure(none, i))) << gpu_figure_name(i);
  s.sample_now();
  s.sample_now();
  const GpuFigures mean = s.take();  // device 0: the two scripted readings' midpoints
  EXPECT_EQ(mean.util_pct, 40);
  EXPECT_EQ(mean.mem_used, 1.25 * kGiB);
  EXPECT_EQ(mean.temp_c, 61);
  EXPECT_EQ(mean.power_w, 155);
  s.sample_now();  // the third reading: the first value again
  const GpuFigures third = s.take();
  EXPECT_EQ(third.util_pct, 30);
  const GpuFigures empty = s.take();  // no reading in this window: the latest one
  EXPECT_EQ(empty.util_pct, 30);
  EXPECT_EQ(empty.power_w, 150);
}

TEST(GpuSampler, TheThreadSamplesByItselfAndStopsPromptly) {
  std::string why;
  auto d = open_fake("", 0, &why);
  ASSERT_TRUE(d) << why;
  auto s = std::make_unique<GpuSampler>(std::move(d), 0.01);
  const auto t0 = std::chrono::steady_clock::now();
  GpuFigures f;
  while (std::isnan(f.util_pct) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    f = s->take();
  }
  EXPECT_GE(f.util_pct, 30);
  EXPECT_LE(f.util_pct, 50);
  auto long_period = std::make_unique<GpuSampler>(open_fake("", 0, &why), 3600);
  const auto t1 = std::chrono::steady_clock::now();
  long_period.reset();  // wakes the thread from its hour-long wait
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(1));
}

TEST(RanksEvent, GpuArraysOnlyForFiguresSomeRankHas) {
  std::vector<RankSample> ranks(2);
  EXPECT_EQ(ranks_event(10, ranks, {}).str().find("gpu_"), std::string::npos) << "no rank has GPU figures";
  ranks[1].gpu.util_pct = 75;
  ranks[1].gpu.power_w = 300.5;
  const std::string j = ranks_event(10, ranks, {}).str();
  EXPECT_NE(j.find("\"gpu_util_pct\":[null,75]"), std::string::npos) << j;
  EXPECT_NE(j.find("\"gpu_power_w\":[null,300.5]"), std::string::npos) << j;
  EXPECT_EQ(j.find("gpu_temp_c"), std::string::npos) << j;
}

}  // namespace
}  // namespace cnn
