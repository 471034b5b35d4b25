// The AVX-512 tile work of the 16-channel Winograd kernels (kernels/cpu/winograd16_avx512.h) gives the same bits
// as their AVX2 code: forward with and without bias, backward-data and backward-weights, over maps cut by the
// edges, smaller than a tile, batches whose last block or group of tiles is partial, and 1 or 2 threads.
// CNNTRAIN_AVX512_KERNELS=0 selects the AVX2 code in the same process. (test_winograd16.cpp checks both against
// the reference kernels: whichever the CPU runs by default.) Needs a CPU with AVX-512F.
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/winograd16_avx512.h"
#include "kernels/cpu/winograd16_conv.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

struct Outputs {
  std::vector<float> y, yb, dx, dw;
};

Outputs run_all(int threads, const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy) {
  const size_t map = static_cast<size_t>(d.n) * d.h * d.w * 16;
  Outputs o{std::vector<float>(map, 7.f), std::vector<float>(map, 7.f), std::vector<float>(map, 7.f),
            std::vector<float>(16 * 9 * 16, 0.5f)};
  winograd16_forward(threads, d, x.data(), w.data(), nullptr, o.y.data());
  winograd16_forward(threads, d, x.data(), w.data(), b.data(), o.yb.data());
  winograd16_backward_data(threads, d, dy.data(), w.data(), o.dx.data());
  winograd16_backward_filter(threads, d, x.data(), dy.data(), o.dw.data());
  return o;
}

TEST(Winograd16Avx512, SameBitsAsAvx2) {
  unsetenv("CNNTRAIN_AVX512_KERNELS");
  if (!wino16_avx512_enabled()) GTEST_SKIP() << "this CPU lacks AVX-512F: only the AVX2 code can run here";
  int checked = 0;
  for (const auto& [n, h, w] : std::vector<std::array<int, 3>>{
           {2, 32, 32}, {3, 7, 9}, {1, 1, 1}, {2, 2, 3}, {2, 5, 2}, {1, 3, 30}, {2, 16, 13}, {9, 11, 26}, {5, 4, 4}}) {
    ConvDesc d;
    d.n = n, d.h = h, d.w = w, d.c = 16, d.k = 16, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
    ASSERT_TRUE(winograd16_ok(d));
    const size_t map = static_cast<size_t>(n) * h * w * 16;
    const auto x = random_vec(map, 11), wt = random_vec(16 * 9 * 16, 12, -0.3f, 0.3f), b = random_vec(16, 13);
    const auto dy = random_vec(map, 14);
    for (int threads : {1, 2}) {
      const Outputs fast = run_all(threads, d, x, wt, b, dy);
      setenv("CNNTRAIN_AVX512_KERNELS", "0", 1);
      ASSERT_FALSE(wino16_avx512_enabled());
      const Outputs avx2 = run_all(threads, d, x, wt, b, dy);
      unsetenv("CNNTRAIN_AVX512_KERNELS");
      const std::string at = std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + ", " +
                             std::to_string(threads) + " threads";
      EXPECT_TRUE(fast.y == avx2.y) << "forward, " << at;
      EXPECT_TRUE(fast.yb == avx2.yb) << "forward with bias, " << at;
      EXPECT_TRUE(fast.dx == avx2.dx) << "backward-data, " << at;
      EXPECT_TRUE(fast.dw == avx2.dw) << "backward-weights, " << at;
      // Not vacuous: the outputs were written (the 7.0 fill is gone) and differ between the passes.
      EXPECT_NE(fast.y[0], 7.f);
      EXPECT_NE(fast.dx[map - 1], 7.f);
      EXPECT_FALSE(fast.y == fast.yb);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

}  // namespace
}  // namespace cnn
