// The fast CPU backend's Winograd F(4x4, 3x3) convolutions (kernels/cpu/dnnl_ops.cpp, wino_eligible) run where
// they should and nowhere else: fp32 3x3 stride-1 "same" convolutions without bias whose channel counts are
// multiples of 16 from 32 up, neither grouped nor dilated nor asymmetrically padded, unless CNNTRAIN_WINOGRAD=0.
// Counted by DnnlOps::winograd_runs(), which the Winograd branches increment when they execute (the sweep checks
// the values they compute). DnnlOps::conv_backward converts dy to the blocked layout once for both backward
// passes there, with the results of the separate calls.
#include <dnnl.h>

#include <cstdlib>

#include "kernels/cpu/dnnl_ops.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::random_vec;

ConvDesc conv(int c, int k, int r, int stride, int pad) {
  ConvDesc d;
  d.n = 2, d.h = 9, d.w = 10, d.c = c, d.k = k, d.r = d.s = r;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad;
  return d;
}
ConvDesc general(ConvDesc d, int groups, int dilation, int extra_pad) {
  d.groups = groups, d.dilation_h = d.dilation_w = dilation, d.extra_pad_h = d.extra_pad_w = extra_pad;
  return d;
}

// Winograd runs of each pass of one convolution: forward, backward-data, backward-weights.
struct Runs {
  uint64_t fwd, bwd_data, bwd_w;
  bool operator==(const Runs& o) const { return fwd == o.fwd && bwd_data == o.bwd_data && bwd_w == o.bwd_w; }
};

Runs passes_on_winograd(DnnlOps& ops, const ConvDesc& d, bool bias) {
  const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  const size_t nw = static_cast<size_t>(d.k) * d.r * d.s * (d.c / d.groups);
  const size_t ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
  const auto x = random_vec(nx, 1), w = random_vec(nw, 2), b = random_vec(d.k, 3), dy = random_vec(ny, 4);
  std::vector<float> y(ny), dx(nx), dw(nw, 0.f), db(d.k, 0.f);
  Runs r{};
  uint64_t before = ops.winograd_runs();
  ops.conv_forward(d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
  r.fwd = ops.winograd_runs() - before;
  before = ops.winograd_runs();
  ops.conv_backward_data(d, dy.data(), w.data(), dx.data());
  r.bwd_data = ops.winograd_runs() - before;
  before = ops.winograd_runs();
  ops.conv_backward_filter(d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
  r.bwd_w = ops.winograd_runs() - before;
  return r;
}

std::string str(const Runs& r) {
  return std::to_string(r.fwd) + "/" + std::to_string(r.bwd_data) + "/" + std::to_string(r.bwd_w);
}

bool cpu_has_winograd() {
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

TEST(Winograd, RunsOnTheEligibleShapesOnly) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  struct Case {
    const char* what;
    ConvDesc d;
    bool bias;
    Runs want;
  };
  const Case cases[] = {
      {"64->64 3x3 same", conv(64, 64, 3, 1, 1), false, {1, 1, 1}},
      {"64->80 3x3 same", conv(64, 80, 3, 1, 1), false, {1, 1, 1}},
      // The bias keeps forward and backward-weights direct; backward-data is a forward without one.
      {"64->64 3x3 same, bias", conv(64, 64, 3, 1, 1), true, {0, 1, 0}},
      {"32->32 3x3 same", conv(32, 32, 3, 1, 1), false, {1, 1, 1}},
      {"16->16 3x3 same (under 32 channels)", conv(16, 16, 3, 1, 1), false, {0, 0, 0}},
      {"16->32 3x3 same (16 input channels)", conv(16, 32, 3, 1, 1), false, {0, 0, 0}},
      {"64->72 3x3 same (72 not a multiple of 16)", conv(64, 72, 3, 1, 1), false, {0, 0, 0}},
      {"64->64 3x3 stride 2", conv(64, 64, 3, 2, 1), false, {0, 0, 0}},
      {"64->64 5x5 same", conv(64, 64, 5, 1, 2), false, {0, 0, 0}},
      {"64->64 3x3 unpadded", conv(64, 64, 3, 1, 0), false, {0, 0, 0}},
      // Otherwise eligible shapes that are grouped, depthwise, dilated or padded more after the input.
      {"64->64 3x3 same, 4 groups", general(conv(64, 64, 3, 1, 1), 4, 1, 0), false, {0, 0, 0}},
      {"64 depthwise 3x3 same", general(conv(64, 64, 3, 1, 1), 64, 1, 0), false, {0, 0, 0}},
      {"64->64 3x3 dilation 2", general(conv(64, 64, 3, 1, 1), 1, 2, 0), false, {0, 0, 0}},
      {"64->64 3x3 pads 1,1,2,2", general(conv(64, 64, 3, 1, 1), 1, 1, 1), false, {0, 0, 0}},
  };
  DnnlOps ops(1);
  for (const Case& c : cases) {
    const Runs got = passes_on_winograd(ops, c.d, c.bias);
    EXPECT_TRUE(got == c.want) << c.what << ": Winograd runs fwd/bwd-data/bwd-weights " << str(got) << ", want "
                               << str(c.want);
  }
}

TEST(Winograd, OffWithTheEnvironmentSwitch) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  setenv("CNNTRAIN_WINOGRAD", "0", 1);
  DnnlOps ops(1);  // reads the switch when created
  unsetenv("CNNTRAIN_WINOGRAD");
  const Runs got = passes_on_winograd(ops, conv(64, 64, 3, 1, 1), false);
  EXPECT_TRUE(got == (Runs{0, 0, 0})) << "CNNTRAIN_WINOGRAD=0: Winograd runs " << str(got);
}

// conv_backward against conv_backward_filter + conv_backward_data on a second DnnlOps: the same bits, and dy
// converted once (blocked_reuses) exactly where both passes run on Winograd and dx is wanted. The second pair
// reuses the first pair's dy buffer with other values: nothing blocked may outlive a call.
TEST(Winograd, BackwardPairConvertsDyOnce) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  struct Case {
    const char* what;
    ConvDesc d;
    bool want_dx;
    uint64_t reuses;  // per pair
  };
  const Case cases[] = {
      {"64->64", conv(64, 64, 3, 1, 1), true, 1},
      {"32->64", conv(32, 64, 3, 1, 1), true, 1},
      {"64->64, no dx (first layer)", conv(64, 64, 3, 1, 1), false, 0},
      {"16->16 (direct kernels)", conv(16, 16, 3, 1, 1), true, 0},
      {"64->64 stride 2 (direct kernels)", conv(64, 64, 3, 2, 1), true, 0},
  };
  DnnlOps paired(2), separate(2);
  for (const Case& c : cases) {
    const ConvDesc& d = c.d;
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    const size_t ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    const auto x = random_vec(nx, 5), w = random_vec(nw, 6);
    std::vector<float> dy(ny);
    for (int pair = 0; pair < 2; ++pair) {
      const auto values = random_vec(ny, 7 + pair);
      dy.assign(values.begin(), values.end());
      std::vector<float> dx1(nx, 0.f), dx2(nx, 0.f), dw1(nw, 0.f), dw2(nw, 0.f);
      const uint64_t before = paired.blocked_reuses();
      paired.conv_backward(DType::kF32, d, x.data(), dy.data(), w.data(), dw1.data(), nullptr,
                           c.want_dx ? dx1.data() : nullptr);
      EXPECT_EQ(paired.blocked_reuses() - before, c.reuses) << c.what << ", pair " << pair;
      separate.conv_backward_filter(d, x.data(), dy.data(), dw2.data(), nullptr);
      if (c.want_dx) separate.conv_backward_data(d, dy.data(), w.data(), dx2.data());
      EXPECT_EQ(dw1, dw2) << c.what << ", pair " << pair << ": weight gradients differ";
      EXPECT_EQ(dx1, dx2) << c.what << ", pair " << pair << ": input gradients differ";
    }
  }
}

// NHWC <-> nChw16c of an [n, h*w, c] tensor (c a multiple of 16).
std::vector<float> relayout(const std::vector<float>& v, int n, int hw, int c, bool to_blocked) {
  std::vector<float> r(v.size());
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < hw; ++p)
      for (int ch = 0; ch < c; ++ch) {
        const size_t nhwc = (static_cast<size_t>(i) * hw + p) * c + ch;
        const size_t blk = ((static_cast<size_t>(i) * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16;
        if (to_blocked)
          r[blk] = v[nhwc];
        else
          r[nhwc] = v[blk];
      }
  return r;
}

// blocked_ok admits the shapes whose three passes all run on Winograd, and there the caller's nChw16c tensors
// are used in place: the same bits as the NHWC calls (whose own conversions oneDNN does), with no layout
// conversion for a tensor given blocked. Every combination of the two layouts.
TEST(Winograd, BlockedActivationsInPlace) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  DnnlOps ops(2), ref(2);
  EXPECT_FALSE(ops.blocked_ok(conv(16, 16, 3, 1, 1))) << "16 channels run direct";
  EXPECT_FALSE(ops.blocked_ok(conv(64, 64, 3, 2, 1))) << "stride 2 runs direct";
  EXPECT_FALSE(ops.blocked_ok(conv(64, 64, 1, 1, 0))) << "1x1 runs direct";
  EXPECT_FALSE(ops.blocked_ok(conv(48, 40, 3, 1, 1))) << "40 is no multiple of 16";
  const ConvDesc d0 = conv(32, 64, 3, 1, 1);
  ASSERT_TRUE(ops.blocked_ok(d0));
  const int hw = d0.h * d0.w;
  const size_t nx = static_cast<size_t>(d0.n) * hw * d0.c, ny = static_cast<size_t>(d0.n) * hw * d0.k;
  const size_t nw = static_cast<size_t>(d0.k) * 9 * d0.c;
  const auto x = random_vec(nx, 11), w = random_vec(nw, 12), dy = random_vec(ny, 13);
  std::vector<float> y_ref(ny), dx_ref(nx), dw_ref(nw, 0.f);
  ref.conv_forward(d0, x.data(), w.data(), nullptr, y_ref.data());
  ref.conv_backward(DType::kF32, d0, x.data(), dy.data(), w.data(), dw_ref.data(), nullptr, dx_ref.data());
  for (int xb = 0; xb < 2; ++xb)
    for (int yb = 0; yb < 2; ++yb) {
      ConvDesc d = d0;
      d.x_layout = xb ? ActLayout::kNChw16c : ActLayout::kNHWC;
      d.y_layout = yb ? ActLayout::kNChw16c : ActLayout::kNHWC;
      const auto xin = xb ? relayout(x, d.n, hw, d.c, true) : x;
      const auto dyin = yb ? relayout(dy, d.n, hw, d.k, true) : dy;
      std::vector<float> y(ny), dx(nx), dw(nw, 0.f);
      const uint64_t before = ops.layout_conversions();
      ops.conv_forward(d, xin.data(), w.data(), nullptr, y.data());
      ops.conv_backward(DType::kF32, d, xin.data(), dyin.data(), w.data(), dw.data(), nullptr, dx.data());
      // NHWC costs: forward x in and y out; backward-weights x and dy in; backward-data dx out (dy reused).
      EXPECT_EQ(ops.layout_conversions() - before, static_cast<uint64_t>(xb ? 0 : 3) + (yb ? 0 : 2))
          << "x blocked " << xb << ", y blocked " << yb;
      EXPECT_EQ(yb ? relayout(y, d.n, hw, d.k, false) : y, y_ref) << "forward, x " << xb << " y " << yb;
      EXPECT_EQ(xb ? relayout(dx, d.n, hw, d.c, false) : dx, dx_ref) << "backward-data, x " << xb << " y " << yb;
      EXPECT_EQ(dw, dw_ref) << "backward-weights, x " << xb << " y " << yb;
    }
  setenv("CNNTRAIN_BLOCKED_LAYOUT", "0", 1);
  DnnlOps off(1);  // reads the switch when created
  unsetenv("CNNTRAIN_BLOCKED_LAYOUT");
  EXPECT_FALSE(off.blocked_ok(d0)) << "CNNTRAIN_BLOCKED_LAYOUT=0";
}

}  // namespace
}  // namespace cnn
