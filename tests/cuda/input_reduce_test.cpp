// Deterministic reductions under an H100's SM count (split-K launch shapes) and the fast division of the
// implicit-GEMM index math, on the emulated CUDA backend. (upload_images is in the backend sweep.)
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/gemm_tile.cuh"
#include "kernels/simt/simt.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

// The emulator reporting an H100's 132 multiprocessors: split-K cuts a long weight-gradient reduction into
// dozens of slices, as on that GPU. The result must match the CPU; with --deterministic it must also be the
// same bit for bit under any block order, which the seeded schedules vary (without it, they differ). The
// setting belongs to the backend: a deterministic and a default backend alive together keep their own.
class SplitK : public ::testing::Test {
 protected:
  void SetUp() override { simt::set_multiprocessor_count(132); }
  void TearDown() override {
    simt::set_multiprocessor_count(0);
    simt::set_schedule_seed(0);
  }
  std::vector<float> filter_grad(Backend* be, const ConvDesc& d, const std::vector<float>& x,
                                 const std::vector<float>& dy, uint64_t schedule) {
    simt::set_schedule_seed(schedule);
    const size_t ws = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    float* d_x = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
    float* d_dy = static_cast<float*>(be->alloc(sizeof(float) * dy.size()));
    float* d_dw = static_cast<float*>(be->alloc(sizeof(float) * ws));
    be->upload(d_x, x.data(), sizeof(float) * x.size());
    be->upload(d_dy, dy.data(), sizeof(float) * dy.size());
    be->fill(d_dw, ws, 0.f);
    be->conv2d_backward_filter(DType::kF32, d, d_x, d_dy, d_dw, nullptr);
    std::vector<float> dw(ws);
    be->download(dw.data(), d_dw, sizeof(float) * ws);
    for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_dy), static_cast<void*>(d_dw)}) be->release(p);
    return dw;
  }
};

TEST_F(SplitK, H100ShapesMatchCpuAndDeterministicModeIsBitExact) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(sms, 132);
  ConvDesc d;
  d.n = 4, d.h = d.w = 16, d.c = 5, d.k = 9, d.r = d.s = 3, d.pad_h = d.pad_w = 1;  // K = n*p*q = 1024: 16 slices
  const auto x = random_vec(static_cast<size_t>(d.n) * d.h * d.w * d.c, 11);
  const auto dy = random_vec(static_cast<size_t>(d.n) * d.p() * d.q() * d.k, 12);
  std::vector<float> want(static_cast<size_t>(d.k) * d.r * d.s * d.c, 0.f);
  make_cpu_backend(1, CpuKernels::kReference)
      ->conv2d_backward_filter(DType::kF32, d, x.data(), dy.data(), want.data(), nullptr);
  GpuOptions det_opts;
  det_opts.deterministic = true;
  // Both made before either runs, and used in turn: a process-wide setting would take the last one's.
  const auto det = make_emu_backend(det_opts), fast = make_emu_backend();
  const auto det_a = filter_grad(det.get(), d, x, dy, 101), fast_a = filter_grad(fast.get(), d, x, dy, 101);
  const auto det_b = filter_grad(det.get(), d, x, dy, 202), fast_b = filter_grad(fast.get(), d, x, dy, 202);
  EXPECT_TRUE(all_close(fast_a, want, 1e-4, 1e-4, "split-K filter gradient"));
  EXPECT_TRUE(all_close(det_a, want, 1e-4, 1e-4, "deterministic filter gradient"));
  EXPECT_EQ(std::memcmp(det_a.data(), det_b.data(), det_a.size() * sizeof(float)), 0)
      << "--deterministic results depend on the block order";
  EXPECT_NE(std::memcmp(fast_a.data(), fast_b.data(), fast_a.size() * sizeof(float)), 0)
      << "the two block orders gave identical split-K sums: the determinism check above proves nothing";
}

TEST(FastDiv, MatchesIntegerDivision) {
  CounterRng rng(5, 5);
  std::vector<int> xs{0, 1, 2, 3, 7, 8, 255, 256, 65535, 65536, 0x7ffffffe, 0x7fffffff};
  for (int i = 0; i < 2000; ++i) xs.push_back(static_cast<int>(rng.next() >> 33));
  std::vector<int> ds{1, 2, 3, 5, 7, 9, 14, 56, 112, 147, 224, 3136, 12544, 65535, 65536, 1 << 20, 0x7fffffff};
  for (int d = 1; d < 600; ++d) ds.push_back(d);
  for (int d : ds) {
    const emu::FastDiv f(d);
    for (int x : xs) {
      int rem = -1;
      const int q = f.divmod(x, rem);
      ASSERT_EQ(q, x / d) << x << " / " << d;
      ASSERT_EQ(rem, x % d) << x << " % " << d;
    }
  }
}

}  // namespace
}  // namespace cnn::test
