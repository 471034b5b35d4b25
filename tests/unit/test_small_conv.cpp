// The fast CPU backend's own kernels for convolutions with few channels: one input channel
// (kernels/cpu/single_channel_conv.h) against the reference kernels over every lane pattern they take
// (K / gcd(K, 8) = 1..4), odd widths (rows that end inside a vector), padding and tap sizes, bias on and off;
// 2-8 input channels (kernels/cpu/small_channel_conv.h) over their register blocks, their AVX-512 code against the
// AVX2 code bit for bit; the same bits for any thread count; and DnnlOps routes exactly the shapes they take to
// them, unless CNNTRAIN_SMALL_CONV=0.
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/conv2d.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/single_channel_conv.h"
#include "kernels/cpu/small_channel_conv.h"
#include "kernels/cpu/winograd16_avx512.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

ConvDesc single(int n, int h, int w, int k, int r, int s, int pad_h, int pad_w) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = 1, d.k = k, d.r = r, d.s = s, d.pad_h = pad_h, d.pad_w = pad_w;
  return d;
}

ConvDesc few(int n, int h, int w, int c, int k, int r, int s, int pad_h, int pad_w) {
  ConvDesc d = single(n, h, w, k, r, s, pad_h, pad_w);
  d.c = c;
  return d;
}

size_t in_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.h * d.w * d.c; }
size_t out_size(const ConvDesc& d) { return static_cast<size_t>(d.n) * d.p() * d.q() * d.k; }
size_t filter_size(const ConvDesc& d) { return static_cast<size_t>(d.k) * d.r * d.s * d.c; }

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                     const ConvDesc& d) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i])))
        << what << " [" << i << "] of " << d.n << "x" << d.h << "x" << d.w << " c" << d.c << " k" << d.k << " "
        << d.r << "x" << d.s << " pad " << d.pad_h << "," << d.pad_w;
}

// K <= 8 (single_channel_rows.cpp: every K 1-8 and its register blocks, rows that end inside a vector, rows
// of one vector, a padded width past the output vectors (9x30 pad 2: 34 > 32), taps wider than a block) and
// K > 8 (the lane patterns: 16 (2 phases), 32 (4), 12 (3)).
std::vector<ConvDesc> shapes() {
  return {single(5, 28, 28, 6, 5, 5, 2, 2), single(3, 13, 11, 6, 5, 5, 0, 0), single(2, 9, 17, 16, 3, 3, 1, 1),
          single(3, 7, 9, 32, 3, 3, 1, 1),  single(2, 8, 5, 8, 1, 1, 0, 0),   single(4, 10, 12, 1, 3, 5, 1, 2),
          single(2, 6, 31, 12, 3, 5, 2, 0), single(1, 4, 4, 4, 4, 4, 3, 3),   single(9, 5, 7, 6, 2, 3, 0, 1),
          single(3, 12, 10, 7, 3, 3, 1, 1), single(2, 9, 30, 3, 5, 5, 2, 2),  single(2, 6, 20, 5, 3, 9, 1, 4),
          single(3, 11, 3, 2, 3, 3, 1, 1),  single(1, 40, 9, 8, 7, 7, 3, 3),  single(2, 5, 45, 1, 1, 8, 0, 0)};
}

TEST(SingleChannelConv, MatchesReference) {
  for (const ConvDesc& d : shapes()) {
    ASSERT_TRUE(single_channel_forward_ok(d) && single_channel_filter_ok(d)) << d.k << " " << d.r << "x" << d.s;
    const auto x = random_vec(in_size(d), 1), w = random_vec(filter_size(d), 2), b = random_vec(d.k, 3);
    const auto dy = random_vec(out_size(d), 4);
    for (bool bias : {false, true}) {
      std::vector<float> y(out_size(d)), want_y(out_size(d));
      single_channel_conv_forward(2, d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), bias ? b.data() : nullptr, want_y.data());
      expect_near_all(y, want_y, "y", d);
      // Gradients accumulate onto what is there.
      std::vector<float> dw(filter_size(d), 0.5f), want_dw(filter_size(d), 0.5f), db(d.k, -1.f), want_db(d.k, -1.f);
      single_channel_conv_backward_filter(2, d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), bias ? want_db.data() : nullptr);
      expect_near_all(dw, want_dw, "dw", d);
      expect_near_all(db, want_db, "db", d);
    }
  }
}

// Shapes over the register blocks: K 8/16/24/32 (1-4 vectors), C 2-8 (one block, or two: C 8 with K 16),
// LeNet-5's conv2 (6 -> 16 5x5, no padding), padded and odd-sized maps, more taps than pixels.
std::vector<ConvDesc> few_shapes() {
  return {few(5, 14, 14, 6, 16, 5, 5, 0, 0), few(3, 9, 7, 3, 16, 3, 3, 1, 1), few(2, 6, 11, 2, 8, 3, 5, 1, 2),
          few(3, 8, 8, 8, 16, 3, 3, 1, 1),   few(2, 5, 9, 4, 24, 3, 3, 0, 1), few(2, 7, 6, 5, 32, 2, 3, 1, 0),
          few(1, 3, 3, 7, 8, 5, 5, 2, 2),    few(9, 4, 5, 8, 32, 1, 1, 0, 0)};
}

TEST(SmallChannelConv, MatchesReference) {
  for (const ConvDesc& d : few_shapes()) {
    ASSERT_TRUE(small_channel_ok(d)) << d.c << "->" << d.k;
    const auto x = random_vec(in_size(d), 1), w = random_vec(filter_size(d), 2), dy = random_vec(out_size(d), 4);
    const auto b = random_vec(d.k, 3);
    for (bool bias : {false, true}) {
      std::vector<float> y(out_size(d)), want_y(out_size(d));
      small_channel_conv_forward(2, d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), bias ? b.data() : nullptr, want_y.data());
      expect_near_all(y, want_y, "y", d);
    }
    std::vector<float> dx(in_size(d), 7.f), want_dx(in_size(d));
    small_channel_conv_backward_data(2, d, dy.data(), w.data(), dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), want_dx.data());
    expect_near_all(dx, want_dx, "dx", d);
    for (bool bias : {false, true}) {
      std::vector<float> dw(filter_size(d), 0.5f), want_dw(filter_size(d), 0.5f), db(d.k, -1.f), want_db(d.k, -1.f);
      small_channel_conv_backward_filter(2, d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), want_dw.data(), bias ? want_db.data() : nullptr);
      expect_near_all(dw, want_dw, "dw", d);
      expect_near_all(db, want_db, "db", d);
    }
  }
}

TEST(SmallChannelConv, SameBitsForAnyThreadCount) {
  const ConvDesc d = few(19, 14, 14, 6, 16, 5, 5, 0, 0);
  const auto x = random_vec(in_size(d), 5), w = random_vec(filter_size(d), 6), dy = random_vec(out_size(d), 8);
  std::vector<float> y1(out_size(d)), dx1(in_size(d)), dw1(filter_size(d), 0.f), db1(d.k, 0.f);
  small_channel_conv_forward(1, d, x.data(), w.data(), nullptr, y1.data());
  small_channel_conv_backward_data(1, d, dy.data(), w.data(), dx1.data());
  small_channel_conv_backward_filter(1, d, x.data(), dy.data(), dw1.data(), db1.data());
  for (int threads : {2, 3}) {
    std::vector<float> y(out_size(d)), dx(in_size(d)), dw(filter_size(d), 0.f), db(d.k, 0.f);
    small_channel_conv_forward(threads, d, x.data(), w.data(), nullptr, y.data());
    small_channel_conv_backward_data(threads, d, dy.data(), w.data(), dx.data());
    small_channel_conv_backward_filter(threads, d, x.data(), dy.data(), dw.data(), db.data());
    EXPECT_EQ(y, y1) << threads << " threads";
    EXPECT_EQ(dx, dx1) << threads << " threads";
    EXPECT_EQ(dw, dw1) << threads << " threads";
    EXPECT_EQ(db, db1) << threads << " threads";
  }
}

// With 16 or 32 output channels, on CPUs with AVX-512F, the kernels run their AVX-512 code (one or two 512-bit
// vectors per pixel): the same bits as the AVX2 code (CNNTRAIN_AVX512_KERNELS=0) in all three passes, over every
// input-channel block (C 2-8), forward blocks of 16 and 12 pixels with a partial last one (Q 37 and 29), padding.
TEST(SmallChannelConv, Avx512SameBitsAsAvx2) {
  const test::ScopedEnv on("CNNTRAIN_AVX512_KERNELS", nullptr);
  if (!avx512_kernels_enabled()) GTEST_SKIP() << "this CPU lacks AVX-512F: only the AVX2 code can run here";
  std::vector<ConvDesc> cases = {few(2, 20, 37, 3, 16, 3, 3, 1, 1), few(3, 9, 29, 7, 32, 3, 3, 1, 1),
                                 few(2, 6, 5, 2, 32, 2, 3, 0, 1),   few(1, 4, 4, 5, 16, 5, 5, 2, 2)};
  for (const ConvDesc& d : few_shapes())
    if (d.k % 16 == 0) cases.push_back(d);
  struct Out {
    std::vector<float> y, yb, dx, dw, db;
  };
  const auto run = [](const ConvDesc& d, int threads, const std::vector<float>& x, const std::vector<float>& w,
                      const std::vector<float>& b, const std::vector<float>& dy) {
    Out o{std::vector<float>(out_size(d), 7.f), std::vector<float>(out_size(d), 7.f),
          std::vector<float>(in_size(d), 7.f), std::vector<float>(filter_size(d), 0.5f), std::vector<float>(d.k, 1.f)};
    small_channel_conv_forward(threads, d, x.data(), w.data(), nullptr, o.y.data());
    small_channel_conv_forward(threads, d, x.data(), w.data(), b.data(), o.yb.data());
    small_channel_conv_backward_data(threads, d, dy.data(), w.data(), o.dx.data());
    small_channel_conv_backward_filter(threads, d, x.data(), dy.data(), o.dw.data(), o.db.data());
    return o;
  };
  int checked = 0;
  for (const ConvDesc& d : cases) {
    ASSERT_TRUE(small_channel_ok(d)) << d.c << "->" << d.k;
    const auto x = random_vec(in_size(d), 31), w = random_vec(filter_size(d), 32), b = random_vec(d.k, 33);
    const auto dy = random_vec(out_size(d), 34);
    for (int threads : {1, 2}) {
      const Out fast = run(d, threads, x, w, b, dy);
      Out avx2;
      {
        const test::ScopedEnv off("CNNTRAIN_AVX512_KERNELS", "0");
        ASSERT_FALSE(avx512_kernels_enabled());
        avx2 = run(d, threads, x, w, b, dy);
      }
      const std::string at = std::to_string(d.c) + " -> " + std::to_string(d.k) + ", " + std::to_string(d.h) + "x" +
                             std::to_string(d.w) + ", " + std::to_string(threads) + " threads";
      EXPECT_TRUE(fast.y == avx2.y) << "forward, " << at;
      EXPECT_TRUE(fast.yb == avx2.yb) << "forward with bias, " << at;
      EXPECT_TRUE(fast.dx == avx2.dx) << "backward-data, " << at;
      EXPECT_TRUE(fast.dw == avx2.dw) << "backward-weights, " << at;
      EXPECT_TRUE(fast.db == avx2.db) << "bias gradient, " << at;
      // Not vacuous: every pass wrote its output.
      EXPECT_NE(fast.y.back(), 7.f);
      EXPECT_NE(fast.dx.back(), 7.f);
      EXPECT_FALSE(fast.y == fast.yb);
      EXPECT_NE(fast.dw[0], 0.5f);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 9);
}

TEST(SingleChannelConv, SameBitsForAnyThreadCount) {
  const ConvDesc d = single(13, 28, 28, 6, 5, 5, 2, 2);
  const auto x = random_vec(in_size(d), 5), w = random_vec(filter_size(d), 6), b = random_vec(d.k, 7);
  const auto dy = random_vec(out_size(d), 8);
  std::vector<float> y1(out_size(d)), dw1(filter_size(d), 0.f), db1(d.k, 0.f);
  single_channel_conv_forward(1, d, x.data(), w.data(), b.data(), y1.data());
  single_channel_conv_backward_filter(1, d, x.data(), dy.data(), dw1.data(), db1.data());
  for (int threads : {2, 3}) {
    std::vector<float> y(out_size(d)), dw(filter_size(d), 0.f), db(d.k, 0.f);
    single_channel_conv_forward(threads, d, x.data(), w.data(), b.data(), y.data());
    single_channel_conv_backward_filter(threads, d, x.data(), dy.data(), dw.data(), db.data());
    EXPECT_EQ(y, y1) << threads << " threads";
    EXPECT_EQ(dw, dw1) << threads << " threads";
    EXPECT_EQ(db, db1) << threads << " threads";
  }
}

TEST(SingleChannelConv, TakesOnlyItsShapes) {
  ConvDesc d = single(2, 8, 8, 6, 5, 5, 2, 2);
  EXPECT_TRUE(single_channel_forward_ok(d));
  ConvDesc other = d;
  other.c = 3;  // several input channels
  EXPECT_FALSE(single_channel_forward_ok(other));
  other = d, other.stride_h = other.stride_w = 2;
  EXPECT_FALSE(single_channel_forward_ok(other));
  other = d, other.dilation_h = 2;
  EXPECT_FALSE(single_channel_forward_ok(other));
  other = d, other.extra_pad_w = 1;
  EXPECT_FALSE(single_channel_forward_ok(other));
  other = d, other.k = 10;  // past 8 channels: the lane patterns, five of them
  EXPECT_FALSE(single_channel_forward_ok(other));
  other = d, other.k = 7, other.s = 11;  // up to 8 channels: any K and width
  EXPECT_TRUE(single_channel_forward_ok(other));
  EXPECT_TRUE(single_channel_filter_ok(other));
  other = d, other.k = 32, other.s = 5;  // 4 patterns x 5 taps: more accumulators than registers
  EXPECT_TRUE(single_channel_forward_ok(other));
  EXPECT_FALSE(single_channel_filter_ok(other));
}

// DnnlOps runs fp32 one-channel shapes and 4-8-channel ones on these kernels (the sweep, tests/backend, checks
// their values through the backend), and leaves them to oneDNN under CNNTRAIN_SMALL_CONV=0.
TEST(SmallConv, DnnlOpsRoutesThem) {
  const ConvDesc d = single(2, 12, 12, 6, 5, 5, 2, 2);
  const auto x = random_vec(in_size(d), 1), w = random_vec(filter_size(d), 2), dy = random_vec(out_size(d), 3);
  std::vector<float> y(out_size(d)), dw(filter_size(d), 0.f), db(d.k, 0.f);
  for (bool allowed : {true, false}) {
    setenv("CNNTRAIN_SMALL_CONV", allowed ? "1" : "0", 1);
    DnnlOps ops(2);
    unsetenv("CNNTRAIN_SMALL_CONV");
    ops.conv_forward(d, x.data(), w.data(), nullptr, y.data());
    ops.conv_backward_filter(d, x.data(), dy.data(), dw.data(), db.data());
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 2u : 0u);
    ConvDesc three = d;
    three.c = 3;
    const auto x3 = random_vec(in_size(d) * 3, 4), w3 = random_vec(filter_size(d) * 3, 5);
    std::vector<float> dw3(filter_size(d) * 3, 0.f);
    ops.conv_forward(three, x3.data(), w3.data(), nullptr, y.data());
    ops.conv_backward_filter(three, x3.data(), dy.data(), dw3.data(), nullptr);
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 2u : 0u) << "three input channels, 6 outputs stay on oneDNN";
    // LeNet-5's conv2: all three passes on the few-channel kernels.
    const ConvDesc c2 = few(2, 14, 14, 6, 16, 5, 5, 0, 0);
    const auto x2 = random_vec(in_size(c2), 6), w2 = random_vec(filter_size(c2), 7), dy2 = random_vec(out_size(c2), 8);
    std::vector<float> y2(out_size(c2)), dx2(in_size(c2)), dw2(filter_size(c2), 0.f);
    ops.conv_forward(c2, x2.data(), w2.data(), nullptr, y2.data());
    ops.conv_backward(DType::kF32, c2, x2.data(), dy2.data(), w2.data(), dw2.data(), nullptr, dx2.data());
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 5u : 0u);
    // Three input channels (an RGB first layer): oneDNN's backward-weights is faster there at one thread.
    const ConvDesc rgb = few(2, 8, 8, 3, 16, 3, 3, 1, 1);
    const auto x3b = random_vec(in_size(rgb), 9), dy3b = random_vec(out_size(rgb), 10);
    std::vector<float> dw3b(filter_size(rgb), 0.f);
    ops.conv_backward_filter(rgb, x3b.data(), dy3b.data(), dw3b.data(), nullptr);
    EXPECT_EQ(ops.small_conv_runs(), allowed ? 5u : 0u);
  }
}

}  // namespace
}  // namespace cnn
