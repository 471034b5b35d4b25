// The fast CPU backend gives the same bits run to run for a fixed thread count (its results are compared
// with the reference kernels by the backend sweep, tests/backend/).
#include <cstring>
#include <utility>

#include "kernels/cpu/cpu_backend.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

class FastKernels : public ::testing::TestWithParam<int> {
 protected:
  // Small test shapes would otherwise run on one thread (kernels/cpu/dnnl_ops.cpp); exercise the parallel paths.
  void SetUp() override { setenv("CNNTRAIN_MIN_PARALLEL_MFLOP", "0", 1); }
  void TearDown() override { unsetenv("CNNTRAIN_MIN_PARALLEL_MFLOP"); }
};

// Checkpoint resume relies on the same inputs giving the same bits (for a fixed thread count).
TEST_P(FastKernels, RunToRunBitExact) {
  // 32 channels: the direct kernels; 64: the Winograd ones (kernels/cpu/dnnl_ops.cpp, wino_eligible).
  for (int ch : {32, 64}) {
    ConvDesc d;
    d.n = 16, d.h = 16, d.w = 16, d.c = ch, d.k = ch, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    auto x = random_vec(nx, 1), w = random_vec(nw, 2), dy = random_vec(nx, 3);
    std::vector<float> first[4];
    for (int rep = 0; rep < 3; ++rep) {
      auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);  // fresh primitives each time
      std::vector<float> y(nx), dx(nx), dw(nw, 0.f), lw(256 * 10, 0.f);
      be->conv2d_forward(DType::kF32, d, x.data(), w.data(), nullptr, y.data());
      be->conv2d_backward_data(DType::kF32, d, dy.data(), w.data(), dx.data());
      be->conv2d_backward_filter(DType::kF32, d, x.data(), dy.data(), dw.data(), nullptr);
      be->linear_backward_weight(DType::kF32, static_cast<int>(nx / 256), 256, 10, x.data(), dy.data(), lw.data(),
                                 nullptr);
      std::vector<float>* now[4] = {&y, &dx, &dw, &lw};
      for (int i = 0; i < 4; ++i) {
        if (rep == 0) first[i] = *now[i];
        else
          EXPECT_EQ(0, std::memcmp(first[i].data(), now[i]->data(), sizeof(float) * first[i].size()))
              << ch << " channels, output " << i;
      }
    }
  }
}

// Filters are re-laid out once per parameter version: under an unchanged version the backend keeps using what
// it derived (a caller breaking that promise sees the old filters, which shows the cache works), a new version
// or version 0 re-reads them (the values themselves are the sweep's business).
TEST_P(FastKernels, FilterLayoutsFollowParamVersion) {
  auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);
  auto conv = [](int h, int c, int k, int r, int pad) {
    ConvDesc d;
    d.n = 2, d.h = d.w = h, d.c = c, d.k = k, d.r = d.s = r, d.pad_h = d.pad_w = pad;
    return d;
  };
  // Stride-1 "same" (backward-data as a flipped forward; at 48 channels on oneDNN's Winograd kernels where it
  // has them) and unpadded 5x5 (oneDNN's backward-data). Not 16 -> 16, 32 -> 32 or 64 -> 64 3x3 "same" nor
  // fewer than 9 input channels: those run on cnntrain's own kernels (winograd16_conv.h, small_channel_conv.h;
  // 32 and 64 channels below AVX-512), which keep no filter copies.
  for (const ConvDesc& d : {conv(8, 16, 32, 3, 1), conv(8, 48, 48, 3, 1), conv(14, 16, 16, 5, 0)}) {
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    const size_t ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    auto x = random_vec(nx, 31), w = random_vec(nw, 32), dy = random_vec(ny, 33);
    auto run = [&](uint64_t version) {
      be->set_param_version(version);
      std::vector<float> y(ny), dx(nx);
      be->conv2d_forward(DType::kF32, d, x.data(), w.data(), nullptr, y.data());
      be->conv2d_backward_data(DType::kF32, d, dy.data(), w.data(), dx.data());
      be->set_param_version(0);
      return std::make_pair(y, dx);
    };
    const uint64_t v = (uint64_t{1} << 50) + d.r;
    const auto first = run(v);
    for (auto& e : w) e *= -0.5f;  // new values under the same version
    EXPECT_EQ(run(v), first);
    const auto fresh = run(v + 100), unversioned = run(0);
    EXPECT_NE(fresh.first, first.first);
    EXPECT_EQ(fresh, unversioned);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, FastKernels, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace cnn
