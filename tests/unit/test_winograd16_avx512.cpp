// The AVX-512 tile work of the Winograd kernels at 16, 32 and 64 channels (kernels/cpu/winograd16_avx512.h) gives
// the same bits as their AVX2 code: forward with and without bias, backward-data (overwriting dx and adding to it)
// and backward-weights, over maps cut by the edges, smaller than a tile, batches whose last block or group of tiles
// is partial, and 1 or 2 threads.
// CNNTRAIN_AVX512_KERNELS=0 selects the AVX2 code in the same process. (test_winograd16.cpp checks both against
// the reference kernels: whichever the CPU runs by default.) Needs a CPU with AVX-512F.
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "kernels/cpu/winograd16_conv.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

struct Outputs {
  std::vector<float> y, yb, dx, dxa, dw;  // dxa: backward-data added into a filled dx
};

Outputs run_all(int threads, const ConvDesc& d, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy) {
  const size_t map = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  Outputs o{std::vector<float>(map, 7.f), std::vector<float>(map, 7.f), std::vector<float>(map, 7.f), x,
            std::vector<float>(static_cast<size_t>(d.c) * 9 * d.c, 0.5f)};
  winograd16_forward(threads, d, x.data(), w.data(), nullptr, o.y.data());
  winograd16_forward(threads, d, x.data(), w.data(), b.data(), o.yb.data());
  winograd16_backward_data(threads, d, dy.data(), w.data(), o.dx.data());
  winograd16_backward_data(threads, d, dy.data(), w.data(), o.dxa.data(), true);
  winograd16_backward_filter(threads, d, x.data(), dy.data(), o.dw.data());
  return o;
}

TEST(Winograd16Avx512, SameBitsAsAvx2) {
  const test::ScopedEnv on("CNNTRAIN_AVX512_KERNELS", nullptr);
  if (!avx512_kernels_enabled()) GTEST_SKIP() << "this CPU lacks AVX-512F: only the AVX2 code can run here";
  int checked = 0;
  // 16 channels over many map shapes; 32 and 64 (ResNet-20's later stages) over a few, with 16x16 and 8x8 maps.
  std::vector<std::array<int, 4>> cases = {{16, 2, 32, 32}, {16, 3, 7, 9},  {16, 1, 1, 1},  {16, 2, 2, 3},
                                           {16, 2, 5, 2},   {16, 1, 3, 30}, {16, 2, 16, 13}, {16, 9, 11, 26},
                                           {16, 5, 4, 4},   {32, 9, 16, 16}, {32, 3, 7, 9},  {32, 2, 5, 2},
                                           {64, 17, 8, 8},  {64, 3, 6, 5},  {64, 1, 1, 1}};
  for (const auto& [c, n, h, w] : cases) {
    ConvDesc d;
    d.n = n, d.h = h, d.w = w, d.c = c, d.k = c, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
    ASSERT_TRUE(c == 16 ? winograd16_ok(d) : winograd_wide_ok(d));
    ASSERT_TRUE(wino16_avx512_takes(c));
    const size_t map = static_cast<size_t>(n) * h * w * c, filters = static_cast<size_t>(c) * 9 * c;
    const auto x = random_vec(map, 11), wt = random_vec(filters, 12, -0.3f, 0.3f), b = random_vec(c, 13);
    const auto dy = random_vec(map, 14);
    for (int threads : {1, 2}) {
      const Outputs fast = run_all(threads, d, x, wt, b, dy);
      Outputs avx2;
      {
        const test::ScopedEnv off("CNNTRAIN_AVX512_KERNELS", "0");
        ASSERT_FALSE(avx512_kernels_enabled());
        avx2 = run_all(threads, d, x, wt, b, dy);
      }
      const std::string at = std::to_string(c) + " channels, " + std::to_string(n) + "x" + std::to_string(h) + "x" +
                             std::to_string(w) + ", " + std::to_string(threads) + " threads";
      EXPECT_TRUE(fast.y == avx2.y) << "forward, " << at;
      EXPECT_TRUE(fast.yb == avx2.yb) << "forward with bias, " << at;
      EXPECT_TRUE(fast.dx == avx2.dx) << "backward-data, " << at;
      EXPECT_TRUE(fast.dxa == avx2.dxa) << "backward-data added to dx, " << at;
      EXPECT_TRUE(fast.dw == avx2.dw) << "backward-weights, " << at;
      // Not vacuous: the outputs were written (the 7.0 fill is gone) and differ between the passes.
      EXPECT_NE(fast.y[0], 7.f);
      EXPECT_NE(fast.dx[map - 1], 7.f);
      EXPECT_FALSE(fast.y == fast.yb);
      EXPECT_FALSE(fast.dxa == fast.dx);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 30);
  EXPECT_FALSE(wino16_avx512_takes(128));
}

// The fast backend (DnnlOps) runs ResNet-20's 32- and 64-channel layers on these kernels, NHWC, where they are on,
// and on oneDNN's Winograd kernels with blocked activations where CNNTRAIN_AVX512_KERNELS=0 (oneDNN 2.6 has them
// from AVX-512 on); 128 channels stay with oneDNN either way.
TEST(Winograd16Avx512, DnnlOpsRoutesThem) {
  const test::ScopedEnv on("CNNTRAIN_AVX512_KERNELS", nullptr);
  if (!avx512_kernels_enabled()) GTEST_SKIP() << "this CPU lacks AVX-512F: only the AVX2 code can run here";
  for (int c : {32, 64, 128}) {
    ConvDesc d;
    d.n = 128, d.h = d.w = 8, d.c = d.k = c, d.r = d.s = 3, d.pad_h = d.pad_w = 1;  // 8192 pixels
    const size_t map = static_cast<size_t>(d.n) * d.h * d.w * c, filters = static_cast<size_t>(c) * 9 * c;
    const auto x = random_vec(map, 21), w = random_vec(filters, 22, -0.3f, 0.3f), dy = random_vec(map, 23);
    for (bool avx512 : {true, false}) {
      const test::ScopedEnv off("CNNTRAIN_AVX512_KERNELS", avx512 ? nullptr : "0");
      DnnlOps ops(2);
      std::vector<float> y(map), dx(map), dw(filters, 0.f);
      const bool blocked = ops.blocked_ok(d);
      ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
      ops.conv_backward(DType::kF32, d, x.data(), dy.data(), w.data(), dw.data(), nullptr, dx.data());
      const bool own = avx512 && c <= 64;
      EXPECT_EQ(ops.small_conv_runs(), own ? 3u : 0u) << c << " channels, AVX-512 kernels " << avx512;
      EXPECT_EQ(blocked, !own) << c << " channels, AVX-512 kernels " << avx512;
      if (own) {  // their bits
        std::vector<float> want(map);
        winograd16_forward(2, d, x.data(), w.data(), nullptr, want.data());
        EXPECT_TRUE(y == want) << c;
      }
    }
  }
}

}  // namespace
}  // namespace cnn
