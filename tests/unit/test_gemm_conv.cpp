// The fast CPU backend's implicit-GEMM convolutions (kernels/cpu/gemm_conv.h): the packed product against a
// double-precision one (rows and columns not multiples of the 6 x 16 register block, sums longer than a slice,
// transposed operands, accumulation, bias, both ways of splitting the work), the forward and filter-gradient
// convolutions against the reference kernels (strides, padding, taps on the padding, 1x1 and 5x5 taps, maps cut
// unevenly), the same bits for 1-3 threads, which shapes they take, and which ones DnnlOps routes to them.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "kernels/conv2d.h"
#include "kernels/cpu/dnnl_conv_shape.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/gemm_conv.h"
#include "dnnl.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

// c = [c +] A B [+ bias] in double, for GemmArgs' strided operands.
std::vector<double> naive(const GemmArgs& g, const std::vector<float>& c0) {
  std::vector<double> c(static_cast<size_t>(g.m) * g.ldc);
  for (long i = 0; i < g.m; ++i)
    for (long j = 0; j < g.n; ++j) {
      double s = g.accumulate ? c0[i * g.ldc + j] : g.bias ? g.bias[j] : 0.0;
      for (long q = 0; q < g.kdim; ++q) s += double(g.a[i * g.a_rs + q * g.a_cs]) * g.b[q * g.b_rs + j * g.b_cs];
      c[i * g.ldc + j] = s;
    }
  return c;
}

struct Case {
  long m, n, kdim;
  bool a_t, b_t;  // operands stored transposed
  bool accumulate, bias;
};

// Every shape through 1, 2 and 3 threads: within a few ulps of the sums (|terms| summed) of the double product,
// the same bits for every thread count, and the padding columns of c untouched.
TEST(PackedGemm, MatchesDoubleProductWithSameBitsForAnyThreadCount) {
  const Case cases[] = {
      {1, 1, 1, false, false, false, false},     {7, 17, 5, false, false, false, true},
      {13, 33, 300, true, false, true, false},   {100, 50, 600, false, true, false, true},
      {6, 16, 256, true, true, true, false},     {500, 40, 70, false, true, true, false},   // many rows: B packed once
      {30, 64, 3000, true, false, true, false},  // a long sum, few rows: B packed per slice and thread, split
      {40, 24, 2000, true, false, false, false}, // over column slivers (2 threads) or rows (3)
      {12, 20, 0, false, false, false, true},    // an empty sum: bias only
      {1000, 40, 600, false, false, true, true}, // many rows, a sum of 3 slices: rows in panels of 576 (rows_split)
      // a long sum into a small result: 8 fixed parts of the sum, added in order (sum_split)
      {20, 150, 9000, true, false, false, true}, {7, 40, 8500, false, true, true, false},
      // A with a stride (transposed) and >= 8 column slivers per thread: its rows copied into panels first, two
      // cache blocks of rows with a partial last panel, B packed once (rows split) or per thread (columns split)
      {151, 300, 700, true, false, true, true},  {20, 520, 600, true, false, false, false},
  };
  for (const Case& k : cases) {
    const long ldc = k.n + 3;
    const auto a = random_vec(static_cast<size_t>(k.m) * std::max(1L, k.kdim), 1);
    const auto b = random_vec(static_cast<size_t>(std::max(1L, k.kdim)) * k.n, 2);
    const auto bias = random_vec(k.n, 3);
    const auto c0 = random_vec(static_cast<size_t>(k.m) * ldc, 4);
    GemmArgs g;
    g.m = k.m, g.n = k.n, g.kdim = k.kdim;
    g.a = a.data(), g.a_rs = k.a_t ? 1 : k.kdim, g.a_cs = k.a_t ? k.m : 1;
    g.b = b.data(), g.b_rs = k.b_t ? 1 : k.n, g.b_cs = k.b_t ? k.kdim : 1;
    g.ldc = ldc, g.accumulate = k.accumulate, g.bias = k.bias ? bias.data() : nullptr;
    const std::vector<double> want = naive(g, c0);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      std::vector<float> c = c0;
      g.c = c.data();
      packed_gemm(threads, g);
      for (long i = 0; i < k.m; ++i)
        for (long j = 0; j < ldc; ++j) {
          const size_t at = static_cast<size_t>(i) * ldc + j;
          if (j >= k.n) {
            ASSERT_EQ(c[at], c0[at]) << "column " << j << " past n written, m" << k.m << " n" << k.n;
            continue;
          }
          const double tol = 2e-6 * (std::sqrt(double(k.kdim) + 1) * 2 + std::fabs(want[at]));
          ASSERT_NEAR(c[at], want[at], tol) << "m" << k.m << " n" << k.n << " k" << k.kdim << " at " << i << "," << j;
        }
      if (threads == 1)
        first = c;
      else
        EXPECT_TRUE(c == first) << "m" << k.m << " n" << k.n << " k" << k.kdim << ": " << threads << " threads";
    }
  }
}

ConvDesc conv(int n, int h, int w, int c, int k, int r, int stride, int pad) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = d.s = r;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad;
  return d;
}

size_t x_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t y_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t w_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * d.c; }

// Sums of `terms` products of values in [-1, 1]: a few ulps of their scale.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                  const ConvDesc& d, double terms) {
  ASSERT_EQ(got.size(), want.size());
  const float tol = 4e-6f * static_cast<float>(std::sqrt(std::max(1.0, terms)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.f + std::fabs(want[i])))
        << what << " [" << i << "] of " << d.c << "->" << d.k << " " << d.r << "x" << d.s << "/" << d.stride_h
        << " on " << d.n << "x" << d.h << "x" << d.w;
}

// ResNet-50's and ResNet-18's strided 3x3 layers (small), odd maps whose last window hangs over the padding,
// 5x5 and 1x1 taps, a 7x7 stem-like stride 2, output channels not a multiple of 16, more than 256 channels
// (two slices per tap), batch 1; for backward-data also a stride of 3 (one tap per class and axis) and a 1x1
// stride 2 (three of four classes of input pixels get no tap: zeros).
std::vector<ConvDesc> shapes() {
  return {conv(2, 8, 8, 128, 128, 3, 2, 1), conv(3, 7, 9, 32, 48, 3, 2, 1),  conv(2, 5, 6, 16, 20, 3, 1, 1),
          conv(1, 9, 7, 16, 16, 5, 1, 2),   conv(2, 6, 6, 64, 40, 1, 2, 0),  conv(2, 11, 10, 16, 16, 7, 2, 3),
          conv(1, 4, 5, 272, 33, 3, 1, 1),  conv(3, 3, 3, 48, 64, 3, 2, 0),  conv(2, 10, 10, 16, 32, 3, 3, 1)};
}

// Filter gradients whose packed columns straddle taps (few channels, gemm_conv_filter_ok only): RGB 7x7 stride
// 2 and 5x5 (75 columns: a partial last sliver), 3x3 over 3 channels (9 columns per filter row: 8-column halves
// spanning two rows), 24 channels strided, 2 channels 4x4 (8 columns per row); maps small enough that most
// pixels have taps on the padding, one wide enough for the interior path, and a stem over 9216 output pixels
// (36 slices: the sum split into fixed parts).
TEST(GemmConv, FilterGradientAcrossTapsMatchesReference) {
  for (const ConvDesc& d : {conv(2, 11, 10, 3, 64, 7, 2, 3), conv(2, 9, 30, 3, 20, 5, 1, 2), conv(3, 7, 20, 3, 16, 3, 1, 1),
                            conv(1, 6, 7, 24, 16, 3, 2, 1), conv(2, 6, 9, 2, 16, 4, 1, 1), conv(1, 5, 40, 3, 8, 7, 2, 3),
                            conv(4, 96, 96, 3, 64, 7, 2, 3)}) {
    ASSERT_FALSE(gemm_conv_ok(d)) << d.c << "->" << d.k << " " << d.r << "x" << d.s;
    ASSERT_TRUE(gemm_conv_filter_ok(d)) << d.c << "->" << d.k << " " << d.r << "x" << d.s;
    const auto x = random_vec(x_size(d), 11), dy = random_vec(y_size(d), 12), db0 = random_vec(d.k, 13);
    std::vector<float> dw(w_size(d), 0.5f), want(w_size(d), 0.5f), db = db0, want_db = db0;
    gemm_conv_backward_filter(2, d, x.data(), dy.data(), dw.data(), db.data());
    conv2d_backward_filter_cpu(d, x.data(), dy.data(), want.data(), want_db.data());
    const double pixels = static_cast<double>(d.n) * d.p() * d.q();
    expect_close(dw, want, "dw", d, pixels);
    expect_close(db, want_db, "db", d, pixels);
    std::vector<float> dw1(w_size(d), 0.5f), dw3(w_size(d), 0.5f);
    gemm_conv_backward_filter(1, d, x.data(), dy.data(), dw1.data(), nullptr);
    gemm_conv_backward_filter(3, d, x.data(), dy.data(), dw3.data(), nullptr);
    EXPECT_TRUE(dw1 == dw && dw3 == dw) << "same bits for 1, 2 and 3 threads: " << d.c << "->" << d.k;
  }
}

TEST(GemmConv, MatchesReference) {
  for (const ConvDesc& d : shapes()) {
    ASSERT_TRUE(gemm_conv_ok(d)) << d.c << "->" << d.k << " " << d.r << "x" << d.s;
    const auto x = random_vec(x_size(d), 1), w = random_vec(w_size(d), 2), b = random_vec(d.k, 3);
    const auto dy = random_vec(y_size(d), 4);
    const double taps = static_cast<double>(d.r) * d.s * d.c, pixels = static_cast<double>(d.n) * d.p() * d.q();
    for (bool bias : {false, true}) {
      std::vector<float> y(y_size(d), 7.f), want(y_size(d));
      gemm_conv_forward(2, d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), bias ? b.data() : nullptr, want.data());
      expect_close(y, want, bias ? "y (bias)" : "y", d, taps);
      if (!bias) {
        std::vector<float> dx(x_size(d), 7.f), want_dx(x_size(d));
        gemm_conv_backward_data(2, d, dy.data(), w.data(), dx.data());
        conv2d_backward_data_cpu(d, dy.data(), w.data(), want_dx.data());
        expect_close(dx, want_dx, "dx", d, static_cast<double>(d.r) * d.s * d.k);
      }
      // The filter gradient accumulates onto what is there.
      std::vector<float> dw(w_size(d), 0.5f), want_dw(w_size(d), 0.5f), db(d.k, 0.25f), want_db(d.k, 0.25f);
      gemm_conv_backward_filter(2, d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), bias ? want_db.data() : nullptr);
      expect_close(dw, want_dw, "dw", d, pixels);
      if (bias) expect_close(db, want_db, "db", d, pixels);
    }
  }
}

// Each output element is one sum in a fixed order whichever thread computes it: 1, 2 and 3 threads give the
// same bits, with problems large enough to be split.
TEST(GemmConv, SameBitsForAnyThreadCount) {
  for (const ConvDesc& d : {conv(8, 14, 14, 128, 128, 3, 2, 1), conv(4, 7, 7, 512, 64, 3, 1, 1)}) {
    const auto x = random_vec(x_size(d), 5), w = random_vec(w_size(d), 6), b = random_vec(d.k, 7);
    const auto dy = random_vec(y_size(d), 8);
    std::vector<float> y1(y_size(d)), dx1(x_size(d)), dw1(w_size(d), 0.f);
    gemm_conv_forward(1, d, x.data(), w.data(), b.data(), y1.data());
    gemm_conv_backward_data(1, d, dy.data(), w.data(), dx1.data());
    gemm_conv_backward_filter(1, d, x.data(), dy.data(), dw1.data(), nullptr);
    for (int threads : {2, 3}) {
      std::vector<float> y(y_size(d)), dx(x_size(d)), dw(w_size(d), 0.f);
      gemm_conv_forward(threads, d, x.data(), w.data(), b.data(), y.data());
      gemm_conv_backward_data(threads, d, dy.data(), w.data(), dx.data());
      gemm_conv_backward_filter(threads, d, x.data(), dy.data(), dw.data(), nullptr);
      EXPECT_TRUE(y == y1) << d.c << " channels, " << threads << " threads";
      EXPECT_TRUE(dx == dx1) << d.c << " channels, " << threads << " threads";
      EXPECT_TRUE(dw == dw1) << d.c << " channels, " << threads << " threads";
    }
  }
}

TEST(GemmConv, TakesOnlyItsShapes) {
  const ConvDesc d = conv(2, 8, 8, 32, 32, 3, 2, 1);
  EXPECT_TRUE(gemm_conv_ok(d));
  ConvDesc other = d;
  other.c = 24;  // a 16-column sliver of the filter gradient would straddle two taps
  EXPECT_FALSE(gemm_conv_ok(other));
  other.r = other.s = 1, other.pad_h = other.pad_w = 0;  // ... not with 1x1 taps
  EXPECT_TRUE(gemm_conv_ok(other));
  other = d, other.groups = 2;
  EXPECT_FALSE(gemm_conv_ok(other));
  other = d, other.dilation_w = 2;
  EXPECT_FALSE(gemm_conv_ok(other));
  other = d, other.extra_pad_h = 1;
  EXPECT_FALSE(gemm_conv_ok(other));
  other = d, other.pad_h = 3;
  EXPECT_FALSE(gemm_conv_ok(other));
  other = d, other.y_layout = ActLayout::kNChw16c;
  EXPECT_FALSE(gemm_conv_ok(other));
  EXPECT_FALSE(gemm_conv_filter_ok(other));
  // The filter gradient also with straddling columns: 8 to 1024 of them per filter row and filter.
  EXPECT_TRUE(gemm_conv_filter_ok(conv(2, 16, 16, 3, 64, 7, 2, 3)));
  EXPECT_TRUE(gemm_conv_filter_ok(conv(2, 8, 8, 24, 32, 3, 1, 1)));
  EXPECT_FALSE(gemm_conv_filter_ok(conv(2, 16, 16, 1, 64, 7, 2, 3)));   // 7 columns per filter row
  EXPECT_FALSE(gemm_conv_filter_ok(conv(2, 16, 16, 24, 64, 7, 2, 3)));  // 1176 columns
}

// A packing buffer that cannot be had (terabytes: more than any machine's memory and swap, which Linux's
// default overcommit refuses) is a normal error naming what to do, raised after the OpenMP region of the threads
// that asked for it, before any operand is read or the result written (the pointers here are never valid).
TEST(GemmConv, OutOfMemoryIsAClearError) {
  // With overcommit always on (vm.overcommit_memory = 1) a 2 TB allocation can succeed, and the kernels would
  // then read the invalid operands.
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  if (overcommit >> mode && mode == 1) GTEST_SKIP() << "vm.overcommit_memory is 1: terabyte allocations may succeed";
  const auto expect_oom = [](const std::function<void()>& f, const char* what) {
    try {
      f();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--train.batch"), std::string::npos) << e.what();
    }
  };
  float dummy[16] = {};
  GemmArgs g;  // a long B of 2^32 columns: each of two threads packs 2 TB of its slivers
  g.m = 6, g.n = 1L << 32, g.kdim = 256, g.a = dummy, g.a_rs = 256, g.a_cs = 1, g.b = dummy, g.b_rs = g.n, g.b_cs = 1;
  g.c = dummy, g.ldc = g.n;
  for (int threads : {1, 2}) expect_oom([&] { packed_gemm(threads, g); }, "packed_gemm");
  // Backward-data of a strided convolution first asks for dx-sized room for its pixel classes (petabytes here).
  const ConvDesc d = conv(1 << 20, 1024, 1024, 1024, 1024, 3, 2, 1);
  expect_oom([&] { gemm_conv_backward_data(2, d, dummy, dummy, dummy); }, "gemm_conv_backward_data");
  // The buffers work again afterwards.
  std::vector<float> a(6), b(16), c(6 * 16);
  for (int i = 0; i < 6; ++i) a[i] = i + 1.0f;
  for (int j = 0; j < 16; ++j) b[j] = j + 1.0f;
  GemmArgs small;  // one sliver, a sum of one: c(i, j) = a(i) b(j)
  small.m = 6, small.n = 16, small.kdim = 1, small.a = a.data(), small.a_rs = 1, small.a_cs = 1, small.b = b.data();
  small.b_rs = 16, small.b_cs = 1, small.c = c.data(), small.ldc = 16;
  for (int threads : {1, 2}) {
    packed_gemm(threads, small);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 16; ++j) ASSERT_EQ(c[i * 16 + j], a[i] * b[j]) << i << "," << j;
  }
}

// Below AVX-512 DnnlOps runs 3x3 convolutions without a Winograd kernel here: the forward from 128 input
// channels, backward-data from 128 input and output channels (stride 1: as the forward with flipped filters), the
// filter gradient from 64 input channels; and the filter gradient of strided 1x1 convolutions from 256 input
// channels to 512 or more, of 256 -> 1024 and 1024 -> 256 1x1 ones and of stride-1 1x1 ones with 128-512
// channels on both sides, and that of few-channel first layers with at least 64 columns (R * S * C) and 64
// filters. Not under CNNTRAIN_GEMM_CONV=0 or CNNTRAIN_SMALL_CONV=0, not from
// AVX-512 on. The results match the reference on every path.
TEST(GemmConv, DnnlOpsRoutesThemBelowAvx512) {
  const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  struct Route {
    ConvDesc d;
    unsigned own;  // passes on gemm_conv below AVX-512
  } routes[] = {{conv(2, 8, 8, 128, 128, 3, 2, 1), 3},
                {conv(2, 8, 8, 64, 128, 3, 2, 1), 1},   // filter gradient only
                {conv(2, 9, 9, 128, 64, 3, 2, 1), 2},   // forward, filter gradient
                {conv(2, 9, 9, 32, 64, 3, 2, 1), 0},
                {conv(2, 4, 4, 512, 512, 3, 1, 1), 3},
                {conv(2, 5, 5, 128, 256, 3, 1, 1), 3},  // C != K, stride 1
                {conv(2, 5, 5, 64, 128, 3, 1, 1), 1},   // ... from 64 input channels: filter gradient only
                {conv(2, 6, 6, 512, 1024, 1, 2, 0), 1},  // strided 1x1: filter gradient only
                {conv(2, 6, 6, 256, 512, 1, 2, 0), 1},   // ... from 256 input channels
                {conv(2, 6, 6, 128, 256, 1, 2, 0), 0},   // ... not from 128
                {conv(2, 6, 6, 256, 128, 1, 2, 0), 0},   // ... or to fewer than 512
                {conv(2, 4, 4, 256, 1024, 1, 1, 0), 1},  // the 256 -> 1024 expansion: filter gradient only
                {conv(2, 4, 4, 1024, 256, 1, 1, 0), 1},  // ... and the 1024 -> 256 reduction
                {conv(2, 4, 4, 256, 512, 1, 1, 0), 1},   // stride-1 1x1 with 128-512 channels both sides
                {conv(2, 4, 4, 512, 128, 1, 1, 0), 1},
                {conv(2, 4, 4, 1024, 512, 1, 1, 0), 0},  // other stride-1 1x1: oneDNN's matmul
                {conv(2, 4, 4, 64, 256, 1, 1, 0), 0},
                {conv(2, 4, 4, 512, 2048, 1, 1, 0), 0},
                {conv(2, 12, 12, 3, 64, 7, 2, 3), 1},  // an RGB 7x7 stem: filter gradient only
                {conv(2, 8, 8, 3, 64, 3, 1, 1), 0},    // ... not with 27 columns
                {conv(2, 12, 12, 3, 32, 7, 2, 3), 0}};  // ... or 32 filters
  for (const Route& rt : routes) {
    const ConvDesc& d = rt.d;
    const auto x = random_vec(x_size(d), 8), w = random_vec(w_size(d), 9, -0.3f, 0.3f);
    const auto dy = random_vec(y_size(d), 10);
    for (const char* off : {"", "CNNTRAIN_SMALL_CONV", "CNNTRAIN_GEMM_CONV"}) {
      if (*off) setenv(off, "0", 1);
      DnnlOps ops(2);
      if (*off) unsetenv(off);
      std::vector<float> y(y_size(d)), dx(x_size(d)), dw(w_size(d), 0.f), want(y_size(d)), want_dx(x_size(d));
      ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), nullptr, want.data());
      expect_close(y, want, "y through DnnlOps", d, 9.0 * d.c);
      ops.conv_backward(DType::kF32, d, x.data(), dy.data(), w.data(), dw.data(), nullptr, dx.data());
      conv2d_backward_data_cpu(d, dy.data(), w.data(), want_dx.data());
      expect_close(dx, want_dx, "dx through DnnlOps", d, 9.0 * d.k);
      std::vector<float> want_dw(w_size(d), 0.f);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), nullptr);
      expect_close(dw, want_dw, "dw through DnnlOps", d, static_cast<double>(d.n) * d.p() * d.q());
      const unsigned own = !avx512 && !*off ? rt.own : 0u;
      EXPECT_EQ(ops.small_conv_runs(), own) << d.c << "->" << d.k << " " << d.r << "x" << d.s << "/" << d.stride_h
                                            << ", off: " << off;
    }
  }
}

// 1x1 stride-1 convolutions on fewer than 1024 output pixels run their forward (with bias) and backward-data as
// matmuls on the filters as they are; from 1024 pixels, strided or padded ones, on the convolution primitive.
// Results match the reference either way.
TEST(GemmConv, SmallPointwiseConvolutionsRunAsMatmuls) {
  ConvDesc padded = conv(2, 4, 4, 48, 40, 1, 1, 0);
  padded.pad_h = padded.pad_w = 0, padded.extra_pad_h = 1;
  const struct {
    ConvDesc d;
    unsigned matmuls;
  } cases[] = {{conv(2, 5, 7, 48, 40, 1, 1, 0), 2},   {conv(3, 1, 1, 64, 256, 1, 1, 0), 2},
               {conv(4, 16, 16, 32, 16, 1, 1, 0), 0}, {conv(2, 6, 6, 48, 40, 1, 2, 0), 0},
               {padded, 0}};
  for (const auto& k : cases) {
    const ConvDesc& d = k.d;
    const auto x = random_vec(x_size(d), 21), w = random_vec(w_size(d), 22), b = random_vec(d.k, 23);
    const auto dy = random_vec(y_size(d), 24);
    DnnlOps ops(2);
    std::vector<float> y(y_size(d)), want(y_size(d)), dx(x_size(d)), want_dx(x_size(d));
    ops.conv_forward(d, x.data(), w.data(), b.data(), y.data());
    conv2d_forward_cpu(d, x.data(), w.data(), b.data(), want.data());
    expect_close(y, want, "y", d, d.c);
    ops.conv_backward_data(d, dy.data(), w.data(), dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), want_dx.data());
    expect_close(dx, want_dx, "dx", d, d.k);
    EXPECT_EQ(ops.pointwise_matmuls(), k.matmuls) << d.n << "x" << d.h << "x" << d.w << " " << d.c << "->" << d.k;
  }
}

// The flipped filters (blocked and threaded) are the definition's: wf[c, R-1-r, S-1-s, k] = w[k, r, s, c], for
// sizes that are no multiple of the blocks, fp32 and bf16 bits, 1 to 3 threads.
TEST(GemmConv, FlipFiltersMatchesDefinition) {
  for (const ConvDesc& d : {conv(1, 4, 4, 19, 37, 3, 1, 1), conv(1, 4, 4, 300, 70, 1, 1, 0), conv(1, 6, 6, 5, 3, 5, 1, 2)}) {
    const size_t count = w_size(d), R = d.r, S = d.s, C = d.c, K = d.k;
    std::vector<float> w(count), want(count);
    std::vector<uint16_t> w16(count), want16(count);
    for (size_t i = 0; i < count; ++i) w[i] = static_cast<float>(i), w16[i] = static_cast<uint16_t>(i * 7);
    for (size_t k = 0; k < K; ++k)
      for (size_t r = 0; r < R; ++r)
        for (size_t s = 0; s < S; ++s)
          for (size_t c = 0; c < C; ++c) {
            const size_t to = ((c * R + R - 1 - r) * S + S - 1 - s) * K + k, from = ((k * R + r) * S + s) * C + c;
            want[to] = w[from], want16[to] = w16[from];
          }
    for (int threads : {1, 2, 3}) {
      std::vector<float> got(count, -1.f);
      std::vector<uint16_t> got16(count, 0xffff);
      flip_filters(d, w.data(), got.data(), threads);
      flip_filters(d, w16.data(), got16.data(), threads);
      EXPECT_TRUE(got == want) << d.c << "->" << d.k << " " << d.r << "x" << d.s << ", " << threads << " threads";
      EXPECT_TRUE(got16 == want16) << d.c << "->" << d.k << " " << d.r << "x" << d.s << ", " << threads << " threads";
    }
  }
}

// Backward-data of `d` through DnnlOps over five calls whose filters change in place with and without a new
// parameter version, against the reference; `own` of them on cnntrain's kernels below AVX-512.
void flipped_filters_follow_versions(const ConvDesc& d, unsigned own) {
  const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  std::vector<float> w = random_vec(w_size(d), 1);
  const auto dy = random_vec(y_size(d), 2);
  DnnlOps ops(2);
  const struct {
    uint64_t version;
    bool change;  // the filters change (in place) before the call
  } calls[] = {{1, false}, {1, false}, {2, true}, {0, true}, {0, true}};
  for (const auto& call : calls) {
    if (call.change)
      for (float& v : w) v = 0.1f - 0.75f * v;
    ops.set_param_version(call.version);
    std::vector<float> dx(x_size(d)), want(x_size(d));
    ops.conv_backward_data(DType::kF32, d, dy.data(), w.data(), dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), want.data());
    expect_close(dx, want, "dx", d, static_cast<double>(d.r) * d.s * d.k);
  }
  EXPECT_EQ(ops.small_conv_runs(), avx512 ? 0u : own);
  EXPECT_EQ(ops.pointwise_matmuls(), 0u);
}

// On oneDNN a stride-1 convolution's backward-data runs as the forward with flipped filters, cached per
// parameter version: filters changed in place under a new version are flipped again, under version 0 at every
// call (a 1x1 one on 1024 pixels: neither the implicit GEMM, which reads the filters unflipped, nor a matmul).
// The implicit GEMM's 3x3 backward-data follows the changes too.
TEST(GemmConv, FlippedFiltersFollowTheParameterVersion) {
  for (const ConvDesc& d : {conv(4, 16, 16, 32, 48, 1, 1, 0), conv(2, 3, 3, 128, 256, 3, 1, 1)}) {
    SCOPED_TRACE(d.r == 1 ? "1x1 on oneDNN" : "3x3 on the implicit GEMM");
    flipped_filters_follow_versions(d, d.r == 1 ? 0u : 5u);
  }
}

}  // namespace
}  // namespace cnn
