// The classic bug of overlapped gradient allreduce, planted: the collective on the communication stream does
// not wait (cudaStreamWaitEvent) for the compute stream that produces its input. With the emulator's streams
// running every call at once the bug cannot show; deferred streams (seeded orders at synchronisation points)
// must catch it for some seed, while the correct version is right under every seed.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/simt/simt.h"
#include "src/comm/comm.h"
#include "src/comm/nccl_emu.h"

namespace cnn {
namespace {

class PlantedMissingWait : public ::testing::Test {
 protected:
  void SetUp() override {
    ncclUniqueId id;
    if (world_rank() == 0) {
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    }
    broadcast(&id, sizeof id, 0);
    ASSERT_EQ(ncclCommInitRank(&comm_, world_size(), id, world_rank()), ncclSuccess);
    for (cudaStream_t* s : {&compute_, &comm_stream_})
      ASSERT_EQ(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&produced_, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&pinned_, kN * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&grad_, kN * sizeof(float)), cudaSuccess);
  }
  void TearDown() override {
    simt::set_deferred_streams(0);
    cudaFree(grad_);
    cudaFreeHost(pinned_);
    cudaEventDestroy(produced_);
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(comm_stream_);
    ncclCommDestroy(comm_);
  }

  // One "step": the compute stream produces this rank's gradient (rank + 1 everywhere, after some other work
  // on the stream), the communication stream sums it over the ranks. True when the sum is right.
  bool step(uint64_t seed, bool wait_for_compute) {
    simt::set_deferred_streams(seed);
    for (size_t i = 0; i < kN; ++i) pinned_[i] = static_cast<float>(world_rank() + 1);
    EXPECT_EQ(cudaMemsetAsync(grad_, 0, kN * sizeof(float), compute_), cudaSuccess);  // zero_grads
    EXPECT_EQ(cudaMemcpyAsync(grad_, pinned_, kN * sizeof(float), cudaMemcpyHostToDevice, compute_), cudaSuccess);
    if (wait_for_compute) {
      EXPECT_EQ(cudaEventRecord(produced_, compute_), cudaSuccess);
      EXPECT_EQ(cudaStreamWaitEvent(comm_stream_, produced_, 0), cudaSuccess);
    }
    EXPECT_EQ(ncclAllReduce(grad_, grad_, kN, ncclFloat32, ncclSum, comm_, comm_stream_), ncclSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(kN);
    EXPECT_EQ(cudaMemcpy(got.data(), grad_, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    const int w = world_size();
    const float want = static_cast<float>(w * (w + 1) / 2);
    // Every rank must agree on the verdict, or the next collective of the test would not match.
    int ok = 1;
    for (float v : got) ok &= v == want;
    return allreduce_min(ok) == 1;
  }

  static constexpr size_t kN = 257;
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cudaEvent_t produced_ = nullptr;
  float* pinned_ = nullptr;
  float* grad_ = nullptr;
};

TEST_F(PlantedMissingWait, ImmediateStreamsHideItDeferredStreamsCatchIt) {
  EXPECT_TRUE(step(0, true));
  EXPECT_TRUE(step(0, false)) << "with every call run at once the missing wait is invisible";
  int caught = 0;
  const int seeds = 16;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    EXPECT_TRUE(step(seed, true)) << "the correct version failed under deferred seed " << seed;
    caught += step(seed, false) ? 0 : 1;
  }
  EXPECT_GT(caught, 0) << "no deferred seed out of " << seeds << " exposed the missing cudaStreamWaitEvent";
  if (world_rank() == 0)
    std::printf("planted missing cudaStreamWaitEvent caught under %d of %d seeds\n", caught, seeds);
}

}  // namespace
}  // namespace cnn
