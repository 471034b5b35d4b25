// The driver-versus-runtime verdict of kernels/cuda/driver_check.h: a driver older than the CUDA runtime is refused
// with both versions and the ways out; newer or equal passes; minor-version compatibility passes with a note.
#include <gtest/gtest.h>

#include "kernels/cuda/driver_check.h"

namespace cnn {
namespace {

void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in:\n" << msg;
}

TEST(DriverCheck, DriverOlderThanTheRuntimeIsRefusedWithBothVersionsAndTheWaysOut) {
  const DriverVerdict v = judge_driver(12020, "535.104.05", 13000);
  EXPECT_FALSE(v.ok);
  expect_mentions(v.message, {"the NVIDIA driver supports CUDA 12.2 (driver 535.104.05)",
                              "this build's CUDA runtime 13.0 needs driver >= 580", "cuda-compat-13-0",
                              "datacenter GPUs", "CUDA toolkit the driver supports"});
  // Known only from nvidia-smi or /proc (the runtime found no libcuda): the release names the branch.
  const DriverVerdict smi = judge_driver(0, "535.104.05", 13000);
  EXPECT_FALSE(smi.ok);
  expect_mentions(smi.message, {"driver 535.104.05 supports CUDA 12 at most", "needs driver >= 580", "cuda-compat"});
}

TEST(DriverCheck, NewEnoughDriversPass) {
  EXPECT_TRUE(judge_driver(13000, "580.65.06", 13000).ok);
  EXPECT_TRUE(judge_driver(13020, "", 13000).ok);
  EXPECT_TRUE(judge_driver(12080, "570.86.10", 12040).ok);
  const DriverVerdict minor = judge_driver(13000, "580.65.06", 13010);
  EXPECT_TRUE(minor.ok);
  expect_mentions(minor.message, {"minor-version compatibility"});
}

TEST(DriverCheck, NoDriverAndUnloadableDriverAreNamed) {
  const DriverVerdict none = judge_driver(0, "", 13000);
  EXPECT_FALSE(none.ok);
  expect_mentions(none.message, {"no NVIDIA driver", "libcuda.so.1", "needs driver >= 580", "--device cpu"});
  const DriverVerdict hidden = judge_driver(0, "580.65.06", 13000);
  EXPECT_FALSE(hidden.ok);
  expect_mentions(hidden.message, {"driver 580.65.06 is installed", "libcuda.so.1", "container"});
}

TEST(DriverCheck, ParsesTheKernelModuleRelease) {
  EXPECT_EQ(nvrm_release("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC "
                         "2023\nGCC version:  gcc version 12.2.0\n"),
            "535.104.05");
  EXPECT_EQ(nvrm_release("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n"),
            "580.65.06");
  EXPECT_EQ(nvrm_release(""), "");
  EXPECT_EQ(nvrm_release("NVRM version: NVIDIA UNIX Kernel Module\n580.1"), "");
  EXPECT_EQ(nvrm_release("GCC version: 12.2.0"), "");
  EXPECT_EQ(min_driver_branch(13), 580);
  EXPECT_EQ(min_driver_branch(12), 525);
  EXPECT_EQ(min_driver_branch(99), 0);
}

}  // namespace
}  // namespace cnn
