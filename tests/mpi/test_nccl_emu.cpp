// The emulated NCCL (src/comm/nccl_emu.h) against what NCCL defines, with small-integer inputs so every
// result is exact: every collective in place and out of place, every reduction, several data types, inside
// groups, with immediate and deferred emulator streams. Runs under mpirun -np 2, 3 and 4 (`make test`). The
// communicator is non-blocking, so calls may return ncclInProgress (polled to completion, as cnntrain does);
// tests/mpi/test_nccl_emu_strict.cpp covers that and the invalid uses the emulation reports.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/simt/simt.h"
#include "src/comm/comm.h"
#include "src/comm/nccl_emu.h"

namespace cnn {
namespace {

// Element i of rank r: small integers whose sums, products, maxima and minima are exact in every type.
int value(int r, size_t i) { return static_cast<int>((i * 7 + 3 * r) % 5) + 1 + (i % 3 == 0 ? r : 0); }

template <class T>
std::vector<T> inputs(int r, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(value(r, i));
  return v;
}

template <class T>
T reduce_ref(ncclRedOp_t op, size_t i, int world) {
  double acc = op == ncclProd ? 1 : op == ncclMax ? -1e30 : op == ncclMin ? 1e30 : 0;
  for (int r = 0; r < world; ++r) {
    const double v = value(r, i);
    acc = op == ncclProd ? acc * v : op == ncclMax ? std::max(acc, v) : op == ncclMin ? std::min(acc, v) : acc + v;
  }
  if (op == ncclAvg) return static_cast<T>(static_cast<T>(acc) / world);
  return static_cast<T>(acc);
}

// A communicator of all ranks, bootstrapped as the trainer does it (rank 0's id through MPI), non-blocking.
class NcclEmu : public ::testing::TestWithParam<uint64_t> {
 protected:
  void SetUp() override {
    simt::set_deferred_streams(GetParam());
    ncclUniqueId id;
    if (world_rank() == 0) {
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    }
    broadcast(&id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(&comm_, world_size(), id, world_rank(), &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << ncclGetErrorString(rc);
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(comm_, &state), ncclSuccess);
    ASSERT_EQ(state, ncclSuccess) << ncclGetLastError(comm_);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamDestroy(stream_);
    EXPECT_EQ(complete(ncclCommFinalize(comm_)), ncclSuccess) << ncclGetLastError(comm_);
    EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess) << ncclGetLastError(nullptr);
    simt::set_deferred_streams(0);
  }

  // A call's result once complete: ncclInProgress is polled through ncclCommGetAsyncError.
  ncclResult_t complete(ncclResult_t rc) {
    while (rc == ncclInProgress)
      if (ncclCommGetAsyncError(comm_, &rc) != ncclSuccess) return ncclInternalError;
    return rc;
  }

  template <class T>
  T* device(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
    // On the collectives' stream: a blocking cudaMemcpy from pageable memory may return before the device
    // write lands (CUDA's rule, which deferred streams enforce), and stream_ does not wait for the null stream.
    EXPECT_EQ(cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream_), cudaSuccess);
    held_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> host(const T* d, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ncclResult_t state = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm_, &state), ncclSuccess);
    EXPECT_EQ(state, ncclSuccess) << ncclGetLastError(comm_);
    EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  ~NcclEmu() override {
    for (void* p : held_) cudaFree(p);
  }

  // Products of up to four ranks' values reach 8^4: too large for 8-bit types (with_prod false).
  template <class T>
  void check_allreduce(ncclDataType_t type, bool with_prod = true) {
    const size_t n = 37;  // ragged
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
      if (op == ncclProd && !with_prod) continue;
      for (bool in_place : {true, false}) {
        T* send = device(inputs<T>(r_, n));
        T* recv = in_place ? send : device(std::vector<T>(n, T(0)));
        ASSERT_EQ(complete(ncclAllReduce(send, recv, n, type, op, comm_, stream_)), ncclSuccess);
        const auto got = host(recv, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(got[i], reduce_ref<T>(op, i, w_))
              << "type " << type << " op " << op << (in_place ? " in" : " out of") << " place, element " << i;
      }
    }
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> held_;
  const int r_ = world_rank(), w_ = world_size();
};

TEST_P(NcclEmu, AllReduceEveryOpAndTypeExact) {
  check_allreduce<float>(ncclFloat32);
  check_allreduce<double>(ncclFloat64);
  check_allreduce<int32_t>(ncclInt32);
  check_allreduce<int64_t>(ncclInt64);
  check_allreduce<uint8_t>(ncclUint8, false);
}

TEST_P(NcclEmu, HalfAndBfloat16ReductionsExact) {
  // 1299 elements: the 16-bit reductions work in blocks of 512 and vectors of 8, so full blocks, a ragged
  // block and a ragged vector tail all take part. Small integers: every result is exact in both types.
  const size_t n = 1299;
  for (ncclDataType_t type : {ncclFloat16, ncclBfloat16})
    for (ncclRedOp_t op : {ncclSum, ncclMax, ncclMin}) {
      const bool half = type == ncclFloat16;
      std::vector<uint16_t> in(n);
      for (size_t i = 0; i < n; ++i)
        in[i] = half ? simt::detail::float_to_half_bits(value(r_, i)) : simt::detail::float_to_bf16_bits(value(r_, i));
      uint16_t* d = device(in);
      ASSERT_EQ(complete(ncclAllReduce(d, d, n, type, op, comm_, stream_)), ncclSuccess);
      const auto got = host(d, n);
      for (size_t i = 0; i < n; ++i) {
        const float v = half ? simt::detail::half_bits_to_float(got[i]) : simt::detail::bf16_bits_to_float(got[i]);
        ASSERT_EQ(v, reduce_ref<float>(op, i, w_)) << (half ? "half" : "bfloat16") << " op " << op << " element " << i;
      }
    }
}

TEST_P(NcclEmu, ReduceScatterInAndOutOfPlace) {
  const size_t per = 5;
  for (bool in_place : {true, false}) {
    float* send = device(inputs<float>(r_, per * w_));
    float* recv = in_place ? send + per * r_ : device(std::vector<float>(per, 0.f));
    ASSERT_EQ(complete(ncclReduceScatter(send, recv, per, ncclFloat32, ncclSum, comm_, stream_)), ncclSuccess);
    const auto got = host(recv, per);
    for (size_t i = 0; i < per; ++i)
      ASSERT_EQ(got[i], reduce_ref<float>(ncclSum, per * r_ + i, w_)) << (in_place ? "in" : "out of") << " place " << i;
  }
}

TEST_P(NcclEmu, AllGatherInAndOutOfPlace) {
  const size_t per = 6;
  for (bool in_place : {true, false}) {
    std::vector<int32_t> mine(per);
    for (size_t i = 0; i < per; ++i) mine[i] = static_cast<int32_t>(100 * r_ + i);
    int32_t* recv = device(std::vector<int32_t>(per * w_, -1));
    int32_t* send = in_place ? recv + per * r_ : device(mine);
    if (in_place) {
      ASSERT_EQ(cudaMemcpyAsync(send, mine.data(), per * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                cudaSuccess);
    }
    ASSERT_EQ(complete(ncclAllGather(send, recv, per, ncclInt32, comm_, stream_)), ncclSuccess);
    const auto got = host(recv, per * w_);
    for (int r = 0; r < w_; ++r)
      for (size_t i = 0; i < per; ++i) ASSERT_EQ(got[per * r + i], static_cast<int32_t>(100 * r + i));
  }
}

TEST_P(NcclEmu, BroadcastFromEveryRootInAndOutOfPlace) {
  const size_t n = 9;
  for (int root = 0; root < w_; ++root) {
    for (bool in_place : {true, false}) {
      double* send = device(inputs<double>(r_, n));
      double* recv = in_place ? send : device(std::vector<double>(n, -1.0));
      ASSERT_EQ(complete(ncclBroadcast(send, recv, n, ncclFloat64, root, comm_, stream_)), ncclSuccess);
      const auto got = host(recv, n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], value(root, i)) << "root " << root << " element " << i;
    }
  }
}

TEST_P(NcclEmu, CollectivesInsideAGroup) {
  const size_t n = 11;
  int64_t* a = device(inputs<int64_t>(r_, n));
  float* b = device(inputs<float>(r_, n * w_));
  float* c = device(std::vector<float>(n, 0.f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(complete(ncclAllReduce(a, a, n, ncclInt64, ncclMax, comm_, stream_)), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested groups are one group
  ASSERT_EQ(complete(ncclReduceScatter(b, c, n, ncclFloat32, ncclSum, comm_, stream_)), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  const auto ga = host(a, n);
  const auto gc = host(c, n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(ga[i], reduce_ref<int64_t>(ncclMax, i, w_));
    ASSERT_EQ(gc[i], reduce_ref<float>(ncclSum, n * r_ + i, w_));
  }
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

TEST_P(NcclEmu, RejectsWhatItDoesNotEmulate) {
  float* d = device(std::vector<float>(4, 1.f));
  EXPECT_EQ(ncclAllReduce(d, d, 4, static_cast<ncclDataType_t>(42), ncclSum, comm_, stream_), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm_)).find("not emulated"), std::string::npos) << ncclGetLastError(comm_);
  EXPECT_EQ(ncclBroadcast(d, d, 4, ncclFloat32, w_, comm_, stream_), ncclInvalidArgument);
  ncclComm_t other = nullptr;
  ncclUniqueId id{};
  EXPECT_EQ(ncclCommInitRank(&other, w_ + 1, id, r_), ncclInvalidArgument);
  int count = 0, rank = -1;
  EXPECT_EQ(ncclCommCount(comm_, &count), ncclSuccess);
  EXPECT_EQ(ncclCommUserRank(comm_, &rank), ncclSuccess);
  EXPECT_EQ(count, w_);
  EXPECT_EQ(rank, r_);
  ncclResult_t state = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
}

// 0: every operation at once; others: deferred streams, queued work run in seeded orders.
INSTANTIATE_TEST_SUITE_P(Streams, NcclEmu, ::testing::Values(0, 5, 23),
                         [](const auto& info) {
                           return info.param ? "deferred" + std::to_string(info.param) : std::string("immediate");
                         });

}  // namespace
}  // namespace cnn
