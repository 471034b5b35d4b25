// The emulator's strict modes against the NCCL and CUDA rules that src/comm/nccl_collectives.cu once broke,
// each with the old behaviour planted (the emulated API called in the old order) and caught: a non-blocking
// communicator destroyed without ncclCommFinalize, a communicator queried after ncclCommAbort (the old
// wait_ready), a thread calling CUDA without cudaSetDevice (the old watchdog probe). Then the real code
// (NcclCollectives with the watchdog's probe running, strict device mode on) passes all of them.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/comm/nccl_emu.h"
#include "src/comm/watchdog.h"

namespace cnn {
namespace {

bool mentions(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// The invalid uses reported since `before` (a count of emu_invalid_uses()).
std::vector<std::string> reported_since(size_t before) {
  const auto all = emu_invalid_uses();
  return std::vector<std::string>(all.begin() + static_cast<long>(before), all.end());
}

class NcclEmuStrict : public ::testing::Test {
 protected:
  ncclComm_t create(bool blocking) {
    ncclUniqueId id;
    if (world_rank() == 0) {
      EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    }
    broadcast(&id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking ? 1 : 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, world_size(), id, world_rank(), &config);
    EXPECT_EQ(complete(comm, rc), ncclSuccess) << ncclGetLastError(comm);
    return comm;
  }
  static ncclResult_t complete(ncclComm_t comm, ncclResult_t rc) {
    while (rc == ncclInProgress)
      if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) return ncclInternalError;
    return rc;
  }
  static void finalize_and_destroy(ncclComm_t comm) {
    EXPECT_EQ(complete(comm, ncclCommFinalize(comm)), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(nullptr);
  }
  float* device_ones(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    const std::vector<float> ones(n, 1.f);
    EXPECT_EQ(cudaMemcpy(p, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    held_.push_back(p);
    return static_cast<float*>(p);
  }
  ~NcclEmuStrict() override {
    for (void* p : held_) cudaFree(p);
  }
  std::vector<void*> held_;
};

TEST_F(NcclEmuStrict, NonBlockingCollectivesReturnInProgressUntilPolled) {
  const size_t before = emu_invalid_uses().size();
  ncclComm_t comm = create(false);
  float* d = device_ones(8);
  int in_progress = 0;
  const int calls = 40;
  for (int i = 0; i < calls; ++i) {
    const ncclResult_t rc = ncclAllReduce(d, d, 8, ncclFloat32, ncclAvg, comm, nullptr);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << ncclGetErrorString(rc);
    if (rc == ncclInProgress) {
      ++in_progress;
      if (in_progress == 1) {  // a second call before the first completed breaks NCCL's rule
        EXPECT_EQ(ncclAllReduce(d, d, 8, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
        const auto got = reported_since(before);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_TRUE(mentions(got[0], "ncclAllReduce: the previous call (ncclAllReduce) returned ncclInProgress"))
            << got[0];
      }
    }
    ASSERT_EQ(complete(comm, rc), ncclSuccess) << ncclGetLastError(comm);
  }
  std::vector<float> h(8);
  ASSERT_EQ(cudaMemcpy(h.data(), d, sizeof(float) * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : h) EXPECT_EQ(v, 1.f);  // averages of ones: each call ran exactly once
  EXPECT_GT(in_progress, 0) << "no call out of " << calls << " returned ncclInProgress";
  EXPECT_LT(in_progress, calls);
  finalize_and_destroy(comm);
  EXPECT_EQ(reported_since(before).size(), 1u);
}

TEST_F(NcclEmuStrict, FinalizeIsInProgressUntilPolledThenNothingMayBeIssued) {
  const size_t before = emu_invalid_uses().size();
  ncclComm_t comm = create(false);
  float* d = device_ones(4);
  ASSERT_EQ(complete(comm, ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, nullptr)), ncclSuccess);
  ASSERT_EQ(ncclCommFinalize(comm), ncclInProgress);
  EXPECT_EQ(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  ASSERT_EQ(complete(comm, ncclInProgress), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  const auto got = reported_since(before);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(mentions(got[0], "ncclAllReduce: the communicator is being finalized")) << got[0];
  // A blocking communicator may be destroyed directly: NCCL finalizes it inside.
  ncclComm_t blocking = create(true);
  EXPECT_EQ(ncclCommDestroy(blocking), ncclSuccess);
}

// The old ~NcclCollectives: ncclCommDestroy of a non-blocking communicator that was never finalized.
TEST_F(NcclEmuStrict, PlantedDestroyWithoutFinalizeIsReported) {
  const size_t before = emu_invalid_uses().size();
  ncclComm_t comm = create(false);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidUsage);
  const auto got = reported_since(before);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(mentions(got[0], "ncclCommDestroy: a non-blocking communicator must be finalized first")) << got[0];
  // It is destroyed all the same: naming it again is a use after free.
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidUsage);
  EXPECT_TRUE(mentions(reported_since(before).back(), "ncclCommCount: the communicator was ended by ncclCommDestroy"));
}

// The old wait_ready: the watchdog thread aborts the communicator, then the main thread polls it.
TEST_F(NcclEmuStrict, PlantedQueryAfterAbortIsReported) {
  const size_t before = emu_invalid_uses().size();
  ncclComm_t comm = create(false);
  float* d = device_ones(4);
  std::thread([comm] { EXPECT_EQ(ncclCommAbort(comm), ncclSuccess); }).join();
  ncclResult_t state = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclInvalidUsage);
  EXPECT_EQ(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidUsage);  // after an abort, never destroy
  const auto got = reported_since(before);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(mentions(got[0], "ncclCommGetAsyncError: the communicator was ended by ncclCommAbort")) << got[0];
  EXPECT_TRUE(mentions(got[1], "ncclAllReduce: the communicator was ended by ncclCommAbort")) << got[1];
  EXPECT_TRUE(mentions(got[2], "ncclCommDestroy: the communicator was ended by ncclCommAbort")) << got[2];
  EXPECT_TRUE(mentions(ncclGetLastError(nullptr), "ncclCommDestroy")) << ncclGetLastError(nullptr);
}

// The old watchdog probe: a thread of its own querying events without selecting the rank's device.
TEST(StrictDevice, PlantedThreadWithoutSetDeviceIsFlagged) {
  simt::set_quiet(true);
  simt::set_strict_device_selection(true);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  const long before = simt::unselected_device_calls();
  cudaError_t unselected = cudaSuccess, selected = cudaErrorInvalidValue;
  std::string message;
  std::thread([&] {
    unselected = cudaEventQuery(e);
    message = simt::last_error_message();
  }).join();
  std::thread([&] {
    selected = cudaSetDevice(0);
    if (selected == cudaSuccess) selected = cudaEventQuery(e);
  }).join();
  simt::set_strict_device_selection(false);
  simt::set_quiet(false);
  EXPECT_EQ(unselected, cudaErrorDeviceUninitialized);
  EXPECT_TRUE(mentions(message, "cudaEventQuery on a host thread that never called cudaSetDevice")) << message;
  EXPECT_EQ(selected, cudaSuccess);
  EXPECT_EQ(simt::unselected_device_calls(), before + 1);
  cudaEventDestroy(e);
}

// The real code under every strict mode: collectives with the watchdog's probe polling them from its thread,
// then the destructor's finalize, poll and destroy. Nothing reported, nothing refused, sums exact.
TEST(NcclCollectivesStrict, ProbeOnItsDeviceAndShutdownFinalizesBeforeDestroy) {
  const size_t before = emu_invalid_uses().size();
  const long unselected = simt::unselected_device_calls();
  simt::set_strict_device_selection(true);
  start_watchdog("");
  {
    auto be = make_emu_backend();
    auto coll = make_emu_collectives(*be);
    const size_t n = 33;
    float* d = static_cast<float*>(be->alloc(n * sizeof(float)));
    const std::vector<float> mine(n, static_cast<float>(world_rank() + 1));
    be->upload(d, mine.data(), n * sizeof(float));
    for (int i = 0; i < 6; ++i) {
      coll->allreduce_sum(d, n, "strict test sum");
      std::this_thread::sleep_for(std::chrono::milliseconds(60));  // the probe polls about every 100 ms
    }
    std::vector<float> got(n);
    be->download(got.data(), d, n * sizeof(float));
    const int w = world_size();
    float want = static_cast<float>(w * (w + 1) / 2);
    for (int i = 1; i < 6; ++i) want *= static_cast<float>(w);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want) << "element " << i;
    be->release(d);
  }
  stop_watchdog();
  simt::set_strict_device_selection(false);
  const auto got = reported_since(before);
  EXPECT_TRUE(got.empty()) << got.front();
  EXPECT_EQ(simt::unselected_device_calls(), unselected) << simt::last_error_message();
}

}  // namespace
}  // namespace cnn
