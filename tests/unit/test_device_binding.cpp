// Which GPU each rank binds, with made-up device counts: one rank per GPU on an 8-GPU node, the refusal
// (exit 2, naming host, ranks and GPU count) when ranks outnumber GPUs, sharing when asked for, and
// CUDA_VISIBLE_DEVICES subsets naming the physical devices.
#include <numeric>

#include "src/base/error.h"
#include "src/comm/device_binding.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

std::vector<int> ranks(int first, int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(DeviceBinding, EightRanksOnEightGpus) {
  const auto node = ranks(8, 8);  // the second node of a job: world ranks 8-15
  for (int local = 0; local < 8; ++local) {
    const DeviceBinding b = choose_device(local, node, 8, nullptr, false, "gpu02");
    EXPECT_EQ(b.device, local);
    EXPECT_EQ(b.visible_id, std::to_string(local));
    EXPECT_FALSE(b.shared);
  }
}

TEST(DeviceBinding, MoreRanksThanGpusIsAUsageErrorNamingHostRanksAndCount) {
  test::expect_throws([] { choose_device(5, ranks(0, 8), 4, "0,1,2,3", false, "gpu07"); }, kExitUsage,
                      {"host gpu07", "8 ranks (0-7)", "only 4 GPUs", "CUDA_VISIBLE_DEVICES=0,1,2,3", "--gpu.share"});
}

TEST(DeviceBinding, SharingWhenAskedForGoesRoundRobin) {
  for (int local = 0; local < 8; ++local) {
    const DeviceBinding b = choose_device(local, ranks(0, 8), 3, nullptr, true, "ws");
    EXPECT_EQ(b.device, local % 3);
    EXPECT_TRUE(b.shared);
  }
}

TEST(DeviceBinding, VisibleDevicesSubsetsNameThePhysicalGpus) {
  // A scheduler handed this job GPUs 4-7: CUDA numbers them 0-3, the table shows 4-7.
  for (int local = 0; local < 4; ++local) {
    const DeviceBinding b = choose_device(local, ranks(0, 4), 4, "4,5,6,7", false, "n1");
    EXPECT_EQ(b.device, local);
    EXPECT_EQ(b.visible_id, std::to_string(4 + local));
  }
  const DeviceBinding u = choose_device(1, ranks(0, 2), 2, "GPU-8f1c, MIG-2b7a", false, "n1");
  EXPECT_EQ(u.device, 1);
  EXPECT_EQ(u.visible_id, "MIG-2b7a");
  // Two ranks, the second sees only its own GPU (e.g. srun --gpu-bind=single:1): both use device 0.
  EXPECT_EQ(choose_device(1, ranks(0, 2), 1, "3", true, "n1").visible_id, "3");
}

TEST(DeviceBinding, NoVisibleGpuFails) {
  test::expect_throws([] { choose_device(0, ranks(0, 1), 0, "", false, "n3"); }, kExitFailure, "no GPU visible");
}

TEST(DeviceBinding, TableListsEveryRank) {
  BindingRow a, b;
  a.rank = 0;
  a.host = "gpu01";
  a.binding = {0, "0", false};
  a.name = "NVIDIA H100 80GB HBM3";
  a.pci_bus_id = "0000:18:00.0";
  a.memory_gib = 79.6;
  b = a;
  b.rank = 1;
  b.local_rank = 1;
  b.binding = {1, "1", false};
  b.pci_bus_id = "0000:2a:00.0";
  const std::string t = format_binding_table({a, b});
  for (const char* needle : {"device binding (2 ranks)", "gpu01", "0000:18:00.0", "0000:2a:00.0", "H100", "79.6 GiB"})
    EXPECT_NE(t.find(needle), std::string::npos) << needle << " missing in\n" << t;
}

}  // namespace
}  // namespace cnn
