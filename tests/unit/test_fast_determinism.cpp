// The fast CPU backend gives the same bits run to run for a fixed thread count (its results are compared
// with the reference kernels by the backend sweep, tests/backend/).
#include <cstring>

#include "kernels/cpu_backend.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

class FastKernels : public ::testing::TestWithParam<int> {
 protected:
  // Small test shapes would otherwise run on one thread (kernels/dnnl_ops.cpp); exercise the parallel paths.
  void SetUp() override { setenv("CNNTRAIN_MIN_PARALLEL_MFLOP", "0", 1); }
  void TearDown() override { unsetenv("CNNTRAIN_MIN_PARALLEL_MFLOP"); }
};

// Checkpoint resume relies on the same inputs giving the same bits (for a fixed thread count).
TEST_P(FastKernels, RunToRunBitExact) {
  ConvDesc d;
  d.n = 16, d.h = 16, d.w = 16, d.c = 32, d.k = 32, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
  const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
  auto x = random_vec(nx, 1), w = random_vec(nw, 2), dy = random_vec(nx, 3);
  std::vector<float> first[4];
  for (int rep = 0; rep < 3; ++rep) {
    auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);  // fresh primitives each time
    std::vector<float> y(nx), dx(nx), dw(nw, 0.f), lw(256 * 10, 0.f);
    be->conv2d_forward(d, x.data(), w.data(), nullptr, y.data());
    be->conv2d_backward_data(d, dy.data(), w.data(), dx.data());
    be->conv2d_backward_filter(d, x.data(), dy.data(), dw.data(), nullptr);
    be->linear_backward_weight(static_cast<int>(nx / 256), 256, 10, x.data(), dy.data(), lw.data(), nullptr);
    std::vector<float>* now[4] = {&y, &dx, &dw, &lw};
    for (int i = 0; i < 4; ++i) {
      if (rep == 0) first[i] = *now[i];
      else EXPECT_EQ(0, std::memcmp(first[i].data(), now[i]->data(), sizeof(float) * first[i].size())) << "output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, FastKernels, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace cnn
