// The fast CPU backend's Winograd F(4x4, 3x3) kernels for 16 -> 16 channel 3x3 "same" convolutions
// (kernels/cpu/winograd16_conv.h): forward (with and without bias), backward-data and backward-weights against
// the reference kernels over map sizes that are and are not multiples of 4 (tiles cut by the right and bottom
// edges), maps smaller than a tile and rows of more tiles than a register block; the same bits for any thread
// count; which shapes they take; and DnnlOps routes exactly those to them, unless CNNTRAIN_SMALL_CONV=0.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/conv2d.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/gemm_conv.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "kernels/cpu/winograd16_conv.h"
#include "dnnl.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

ConvDesc same16(int n, int h, int w, int c = 16) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = c, d.r = 3, d.s = 3, d.pad_h = 1, d.pad_w = 1;
  return d;
}

size_t map_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * 9 * d.c; }
constexpr size_t kFilters = 16 * 3 * 3 * 16;

// Winograd's transforms round differently from a direct sum: compare against the sums' scale, which grows with
// the square root of the terms summed (9 * channels for an output or input pixel, n * h * w for a filter tap).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                  const ConvDesc& d, double terms = 0) {
  ASSERT_EQ(got.size(), want.size());
  if (terms <= 0) terms = 9.0 * d.c;
  const float tol = 2e-5f * static_cast<float>(std::sqrt(std::max(1.0, terms / 144)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (4.f + std::fabs(want[i])))
        << what << " [" << i << "] of " << d.n << "x" << d.h << "x" << d.w;
}

std::vector<ConvDesc> shapes() {
  return {same16(2, 32, 32), same16(3, 7, 9), same16(1, 1, 1), same16(2, 2, 3), same16(2, 5, 2),
          same16(1, 3, 30), same16(2, 16, 13), same16(1, 11, 26)};
}

// 32 to 256 channels (winograd_wide_ok): ResNet-20's later stages (16x16 and 8x8 maps, where a block of tiles
// spans images), ResNet-50's 128- and 256-channel stages (28x28, 14x14), maps cut by the edges, smaller than a
// tile, and a batch whose last block is partial.
std::vector<ConvDesc> wide_shapes() {
  return {same16(2, 16, 16, 32), same16(3, 8, 8, 64), same16(2, 7, 9, 32), same16(3, 1, 2, 64),
          same16(5, 6, 5, 64),   same16(1, 13, 3, 32), same16(2, 7, 7, 128), same16(3, 5, 2, 128),
          same16(2, 6, 7, 256),  same16(1, 3, 3, 256)};
}

void check_against_reference(const ConvDesc& d) {
  {
    const size_t filters = filter_size(d);
    const auto x = random_vec(map_size(d), 1), w = random_vec(filters, 2, -0.3f, 0.3f), b = random_vec(d.k, 3);
    const auto dy = random_vec(map_size(d), 4);
    for (bool bias : {false, true}) {
      std::vector<float> y(map_size(d), 7.f), want(map_size(d));
      winograd16_forward(2, d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), bias ? b.data() : nullptr, want.data());
      expect_close(y, want, bias ? "y (bias)" : "y", d);
    }
    std::vector<float> dx(map_size(d), 7.f), want_dx(map_size(d));
    winograd16_backward_data(2, d, dy.data(), w.data(), dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), want_dx.data());
    expect_close(dx, want_dx, "dx", d);
    // The filter gradient accumulates onto what is there; sums over up to n * h * w pixels.
    std::vector<float> dw(filters, 0.5f), want_dw(filters, 0.5f);
    winograd16_backward_filter(2, d, x.data(), dy.data(), dw.data());
    conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), nullptr);
    expect_close(dw, want_dw, "dw", d, static_cast<double>(d.n) * d.h * d.w);
  }
}

TEST(Winograd16, MatchesReference) {
  for (const ConvDesc& d : shapes()) {
    ASSERT_TRUE(winograd16_ok(d) && !winograd_wide_ok(d)) << d.h << "x" << d.w;
    check_against_reference(d);
  }
}

TEST(WinogradWide, MatchesReference) {
  for (const ConvDesc& d : wide_shapes()) {
    ASSERT_TRUE(winograd_wide_ok(d) && !winograd16_ok(d)) << d.c << " " << d.h << "x" << d.w;
    check_against_reference(d);
  }
}

TEST(WinogradWide, TakesOnlyItsShapes) {
  ConvDesc d = same16(2, 8, 8, 32);
  EXPECT_TRUE(winograd_wide_ok(d));
  d.c = d.k = 256;
  EXPECT_TRUE(winograd_wide_ok(d));
  d.c = d.k = 512;
  EXPECT_FALSE(winograd_wide_ok(d));
  d.c = d.k = 128;
  EXPECT_TRUE(winograd_wide_ok(d));
  d.c = d.k = 64;
  EXPECT_TRUE(winograd_wide_ok(d));
  ConvDesc other = d;
  other.c = other.k = 48;
  EXPECT_FALSE(winograd_wide_ok(other));
  other = d, other.k = 32;
  EXPECT_FALSE(winograd_wide_ok(other));
  other = d, other.stride_h = other.stride_w = 2;
  EXPECT_FALSE(winograd_wide_ok(other));
  other = d, other.x_layout = other.y_layout = ActLayout::kNChw16c;
  EXPECT_FALSE(winograd_wide_ok(other));
  other = d, other.groups = 64;
  EXPECT_FALSE(winograd_wide_ok(other));
}

// Each output pixel is summed on its own, the filter gradient in fixed chunks of images: 1, 2 and 3 threads
// give the same bits (batches large enough that the kernels do use the threads), at 16 to 256 channels.
TEST(Winograd16, SameBitsForAnyThreadCount) {
  for (const ConvDesc& d :
       {same16(40, 32, 32), same16(9, 16, 16, 32), same16(13, 8, 8, 64), same16(20, 7, 7, 128),
        same16(20, 6, 5, 256)}) {
    const size_t filters = filter_size(d);
    const auto x = random_vec(map_size(d), 5), w = random_vec(filters, 6, -0.3f, 0.3f), b = random_vec(d.k, 7);
    const auto dy = random_vec(map_size(d), 8);
    std::vector<float> y1(map_size(d)), dx1(map_size(d)), dw1(filters, 0.f);
    winograd16_forward(1, d, x.data(), w.data(), b.data(), y1.data());
    winograd16_backward_data(1, d, x.data(), w.data(), dx1.data());
    winograd16_backward_filter(1, d, x.data(), dy.data(), dw1.data());
    for (int threads : {2, 3}) {
      std::vector<float> y(map_size(d)), dx(map_size(d)), dw(filters, 0.f);
      winograd16_forward(threads, d, x.data(), w.data(), b.data(), y.data());
      winograd16_backward_data(threads, d, x.data(), w.data(), dx.data());
      winograd16_backward_filter(threads, d, x.data(), dy.data(), dw.data());
      EXPECT_TRUE(y == y1) << d.c << " channels, " << threads << " threads";
      EXPECT_TRUE(dx == dx1) << d.c << " channels, " << threads << " threads";
      EXPECT_TRUE(dw == dw1) << d.c << " channels, " << threads << " threads";
    }
  }
}

// Backward-data with `add` (a residual block's dx: Backend::conv2d_backward_data_add) has the bits of computing
// dx and adding it afterwards, at 16 to 256 channels and 1 to 3 threads; the kernel the CPU runs by default
// (test_winograd16_avx512.cpp checks the AVX-512 code against the AVX2 code, the adding pass included).
TEST(Winograd16, BackwardDataAddsWithTheBitsOfAnAddAfterwards) {
  std::vector<ConvDesc> all = shapes();
  for (const ConvDesc& d : wide_shapes()) all.push_back(d);
  for (const ConvDesc& d : all)
    for (int threads : {1, 3}) {
      const auto w = random_vec(filter_size(d), 2, -0.3f, 0.3f), dy = random_vec(map_size(d), 4);
      const auto before = random_vec(map_size(d), 9);
      std::vector<float> dx(map_size(d), 7.f), want = before, got = before;
      winograd16_backward_data(threads, d, dy.data(), w.data(), dx.data());
      for (size_t i = 0; i < want.size(); ++i) want[i] += dx[i];
      winograd16_backward_data(threads, d, dy.data(), w.data(), got.data(), true);
      EXPECT_TRUE(got == want) << d.c << " channels, " << d.n << "x" << d.h << "x" << d.w << ", " << threads
                               << " threads";
      EXPECT_FALSE(got == dx);
      EXPECT_FALSE(got == before);
    }
}

// DnnlOps adds in backward-data exactly where its Winograd kernels run it (fp32, not under CNNTRAIN_SMALL_CONV=0),
// and refuses to elsewhere.
TEST(Winograd16, DnnlOpsAddsOnlyOnTheseKernels) {
  const ConvDesc d = same16(2, 10, 10);
  ConvDesc strided = d;
  strided.stride_h = strided.stride_w = 2;
  for (bool allowed : {true, false}) {
    const test::ScopedEnv env("CNNTRAIN_SMALL_CONV", allowed ? "1" : "0");
    DnnlOps ops(2);
    EXPECT_EQ(ops.backward_data_adds(DType::kF32, d), allowed);
    EXPECT_FALSE(ops.backward_data_adds(DType::kBF16, d));
    EXPECT_FALSE(ops.backward_data_adds(DType::kF32, strided));
    const auto w = random_vec(kFilters, 9, -0.3f, 0.3f), dy = random_vec(map_size(d), 10);
    std::vector<float> dx = random_vec(map_size(d), 12), want = dx, once(map_size(d));
    if (allowed) {
      winograd16_backward_data(2, d, dy.data(), w.data(), once.data());
      for (size_t i = 0; i < want.size(); ++i) want[i] += once[i];
      ops.conv_backward_data_add(DType::kF32, d, dy.data(), w.data(), dx.data());
      EXPECT_TRUE(dx == want);
    } else {
      EXPECT_THROW(ops.conv_backward_data_add(DType::kF32, d, dy.data(), w.data(), dx.data()), Error);
    }
  }
}

TEST(Winograd16, TakesOnlyItsShape) {
  const ConvDesc d = same16(2, 8, 8);
  EXPECT_TRUE(winograd16_ok(d));
  ConvDesc other = d;
  other.c = 32;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.k = 8;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.stride_h = other.stride_w = 2;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.pad_h = other.pad_w = 0;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.r = other.s = 5, other.pad_h = other.pad_w = 2;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.dilation_h = 2;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.groups = 16;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.extra_pad_w = 1;
  EXPECT_FALSE(winograd16_ok(other));
  other = d, other.x_layout = ActLayout::kNChw16c;
  EXPECT_FALSE(winograd16_ok(other));
}

// DnnlOps runs all three passes of 16 -> 16 3x3 "same" convolutions here (backward-weights without a bias
// gradient), other shapes not, and none under CNNTRAIN_SMALL_CONV=0.
TEST(Winograd16, DnnlOpsRoutesThem) {
  const ConvDesc d = same16(2, 10, 10);
  const auto x = random_vec(map_size(d), 8), w = random_vec(kFilters, 9, -0.3f, 0.3f), dy = random_vec(map_size(d), 10);
  for (bool allowed : {true, false}) {
    setenv("CNNTRAIN_SMALL_CONV", allowed ? "1" : "0", 1);
    DnnlOps ops(2);
    unsetenv("CNNTRAIN_SMALL_CONV");
    std::vector<float> y(map_size(d)), dx(map_size(d)), dw(kFilters, 0.f), want(map_size(d));
    ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
    conv2d_forward_cpu(d, x.data(), w.data(), nullptr, want.data());
    expect_close(y, want, "y through DnnlOps", d);
    ops.conv_backward(DType::kF32, d, x.data(), dy.data(), w.data(), dw.data(), nullptr, dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), want.data());
    expect_close(dx, want, "dx through DnnlOps", d);
    std::vector<float> want_dw(kFilters, 0.f);
    conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), nullptr);
    expect_close(dw, want_dw, "dw through DnnlOps", d, static_cast<double>(d.n) * d.h * d.w);
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 3u : 0u);
    std::vector<float> db(16, 0.f);  // with a bias gradient: oneDNN
    ops.conv_backward_filter(d, x.data(), dy.data(), dw.data(), db.data());
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 3u : 0u);
    ConvDesc wide = d;  // 16 -> 32: oneDNN
    wide.k = 32;
    const auto w32 = random_vec(kFilters * 2, 11);
    std::vector<float> y32(map_size(d) * 2);
    ops.conv_forward(wide, x.data(), w32.data(), nullptr, y32.data());
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 3u : 0u);
  }
}

// 32 to 256 channels: DnnlOps runs them here only where oneDNN has no Winograd kernel of its own (below
// AVX-512; above it oneDNN's Winograd and blocked activations take these shapes) or, at 32 and 64 channels, where
// cnntrain's AVX-512 code runs them (winograd16_avx512.h), and not under CNNTRAIN_SMALL_CONV=0 or
// CNNTRAIN_WINOGRAD=0. The results match the reference on either path.
TEST(WinogradWide, DnnlOpsRoutesThemBelowAvx512) {
  const bool onednn_winograd = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  setenv("CNNTRAIN_WINOGRAD_MIN_PIXELS", "0", 1);  // these 192 pixels would otherwise take the direct kernels
  for (int c : {32, 64, 128, 256}) {
    const ConvDesc d = same16(3, 8, 8, c);
    const size_t filters = filter_size(d);
    const auto x = random_vec(map_size(d), 8), w = random_vec(filters, 9, -0.3f, 0.3f);
    const auto dy = random_vec(map_size(d), 10);
    for (const char* off : {"", "CNNTRAIN_SMALL_CONV", "CNNTRAIN_WINOGRAD"}) {
      if (*off) setenv(off, "0", 1);
      DnnlOps ops(2);
      if (*off) unsetenv(off);
      std::vector<float> y(map_size(d)), dx(map_size(d)), dw(filters, 0.f), want(map_size(d));
      ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), nullptr, want.data());
      expect_close(y, want, "y through DnnlOps", d);
      ops.conv_backward(DType::kF32, d, x.data(), dy.data(), w.data(), dw.data(), nullptr, dx.data());
      conv2d_backward_data_cpu(d, dy.data(), w.data(), want.data());
      expect_close(dx, want, "dx through DnnlOps", d);
      std::vector<float> want_dw(filters, 0.f);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), nullptr);
      expect_close(dw, want_dw, "dw through DnnlOps", d, static_cast<double>(d.n) * d.h * d.w);
      const bool own = (!onednn_winograd || (c <= 64 && avx512_kernels_enabled())) && !*off;
      EXPECT_EQ(ops.small_conv_runs(), own ? 3u : 0u) << c << " channels, off: " << off;
    }
  }
  unsetenv("CNNTRAIN_WINOGRAD_MIN_PIXELS");
}

// From 64 channels the wide kernels need 4096 output pixels (n * h * w): below, DnnlOps runs the forward on
// another kernel (for 128 channels cnntrain's implicit GEMM: its bits); at 32 channels, and from 4096 pixels,
// on the Winograd kernels (their bits). CNNTRAIN_WINOGRAD_MIN_PIXELS moves the bound.
// From AVX-512 on, the 32- and 64-channel cases (cnntrain's AVX-512 code), not 128 (oneDNN's Winograd).
TEST(WinogradWide, FewPixelsTakeTheDirectKernels) {
  const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  if (avx512 && !avx512_kernels_enabled())
    GTEST_SKIP() << "from AVX-512 on oneDNN runs its own Winograd kernels (CNNTRAIN_AVX512_KERNELS=0)";
  int checked = 0;
  const struct {
    ConvDesc d;
    const char* bound;  // CNNTRAIN_WINOGRAD_MIN_PIXELS, or null
    bool winograd;
  } cases[] = {{same16(3, 8, 8, 128), nullptr, false},  {same16(64, 8, 8, 64), nullptr, true},
               {same16(3, 8, 8, 32), nullptr, true},    {same16(63, 8, 8, 64), nullptr, false},
               {same16(3, 8, 8, 128), "192", true},     {same16(64, 8, 8, 64), "5000", false}};
  for (const auto& k : cases) {
    const ConvDesc& d = k.d;
    if (avx512 && d.c > 64) continue;
    ++checked;
    const auto x = random_vec(map_size(d), 11), w = random_vec(filter_size(d), 12, -0.3f, 0.3f);
    if (k.bound)
      setenv("CNNTRAIN_WINOGRAD_MIN_PIXELS", k.bound, 1);
    else
      unsetenv("CNNTRAIN_WINOGRAD_MIN_PIXELS");
    DnnlOps ops(2);
    unsetenv("CNNTRAIN_WINOGRAD_MIN_PIXELS");
    std::vector<float> y(map_size(d)), wino(map_size(d));
    ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
    winograd16_forward(2, d, x.data(), w.data(), nullptr, wino.data());
    EXPECT_EQ(y == wino, k.winograd) << d.n << "x" << d.h << "x" << d.w << ", " << d.c << " channels, bound "
                                     << (k.bound ? k.bound : "default");
    if (!k.winograd && d.c >= 128) {
      std::vector<float> gemm(map_size(d));
      gemm_conv_forward(2, d, x.data(), w.data(), nullptr, gemm.data());
      EXPECT_TRUE(y == gemm) << d.n << "x" << d.h << "x" << d.w << ", " << d.c << " channels";
    }
  }
  EXPECT_EQ(checked, avx512 ? 4 : 6);
}

}  // namespace
}  // namespace cnn
