// The fast CPU batch norm over per-operand layouts (kernels/cpu/batchnorm_blocked.cpp) against the NHWC fast
// kernel (batchnorm_fast.cpp) on the same tensors in NHWC: every combination of x, y and residual layouts,
// with and without the residual and the ReLU. The two differ only in summation order. Also: the documented
// ReLU mask bit order, thread-count independence, and a blocked layout with c % 16 != 0 throws.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/fast_cpu.h"
#include "src/base/error.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;
constexpr ActLayout kN = ActLayout::kNHWC, kB = ActLayout::kNChw16c;

// Where the element at NHWC index e sits in layout l.
size_t index_in(const BnShape& s, ActLayout l, size_t e) {
  if (l == kN) return e;
  const size_t c = s.c, hw = s.hw, ch = e % c, p = e / c % hw, i = e / c / hw;
  return ((i * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16;
}
std::vector<float> to_layout(const BnShape& s, ActLayout l, const std::vector<float>& nhwc) {
  std::vector<float> v(nhwc.size());
  for (size_t e = 0; e < v.size(); ++e) v[index_in(s, l, e)] = nhwc[e];
  return v;
}
std::vector<float> to_nhwc(const BnShape& s, ActLayout l, const std::vector<float>& v) {
  std::vector<float> nhwc(v.size());
  for (size_t e = 0; e < v.size(); ++e) nhwc[e] = v[index_in(s, l, e)];
  return nhwc;
}
bool any_blocked(const BnShape& s) { return s.x == kB || s.y == kB || s.residual == kB; }

// Everything one infer + forward + backward produces, tensors converted to NHWC.
struct BnRun {
  std::vector<float> y, y_infer, mean, invstd, rmean, rvar, dx, dres, dgamma, dbeta;
  std::vector<bool> mask;  // in NHWC order
};

// Same inputs (NHWC, from seed) for any layouts; `layout` runs batchnorm_*_layout on s, else batchnorm_*_fast
// on NHWC. x has a non-zero mean so that variance cancellation would show.
BnRun run_bn(int threads, const BnShape& s, bool residual, BnAct act, bool want_dx, bool layout, uint64_t seed) {
  const size_t n = s.rows() * s.c;
  const int rows = static_cast<int>(s.rows());
  const BnShape t = layout ? s : BnShape{s.n, s.hw, s.c};
  const auto x = to_layout(t, t.x, random_vec(n, seed, 2.f, 4.f));
  const auto res = to_layout(t, t.residual, random_vec(n, seed + 1));
  const auto dy = to_layout(t, t.y, random_vec(n, seed + 2));
  const auto gamma = random_vec(s.c, seed + 3, 0.5f, 1.5f), beta = random_vec(s.c, seed + 4);
  BnRun r;
  r.rmean = random_vec(s.c, seed + 5);
  r.rvar = random_vec(s.c, seed + 6, 0.5f, 2.f);
  r.dgamma = random_vec(s.c, seed + 7);
  r.dbeta = random_vec(s.c, seed + 8);
  r.mean.resize(s.c);
  r.invstd.resize(s.c);
  r.y.assign(n, 7.f);
  r.y_infer.assign(n, 7.f);
  r.dx.assign(n, 7.f);
  r.dres.assign(n, 7.f);
  std::vector<uint32_t> words(relu_mask_words(n), 0x5a5a5a5au);
  const float* z = residual ? res.data() : nullptr;
  uint32_t* m = act.relu ? words.data() : nullptr;
  float* dx = want_dx ? r.dx.data() : nullptr;
  float* dres = residual ? r.dres.data() : nullptr;
  if (layout) {
    batchnorm_forward_infer_layout(threads, t, x.data(), z, gamma.data(), beta.data(), r.rmean.data(),
                                   r.rvar.data(), 1e-5f, act, r.y_infer.data());
    batchnorm_forward_train_layout(threads, t, x.data(), z, gamma.data(), beta.data(), 1e-5f, 0.1f, act,
                                   r.y.data(), m, r.mean.data(), r.invstd.data(), r.rmean.data(), r.rvar.data());
    batchnorm_backward_layout(threads, t, x.data(), m, dy.data(), gamma.data(), r.mean.data(), r.invstd.data(),
                              dx, dres, r.dgamma.data(), r.dbeta.data());
  } else {
    batchnorm_forward_infer_fast(threads, rows, s.c, x.data(), z, gamma.data(), beta.data(), r.rmean.data(),
                                 r.rvar.data(), 1e-5f, act, r.y_infer.data());
    batchnorm_forward_train_fast(threads, rows, s.c, x.data(), z, gamma.data(), beta.data(), 1e-5f, 0.1f, act,
                                 r.y.data(), m, r.mean.data(), r.invstd.data(), r.rmean.data(), r.rvar.data());
    batchnorm_backward_fast(threads, rows, s.c, x.data(), m, dy.data(), gamma.data(), r.mean.data(),
                            r.invstd.data(), dx, dres, r.dgamma.data(), r.dbeta.data());
  }
  r.y = to_nhwc(t, t.y, r.y);
  r.y_infer = to_nhwc(t, t.y, r.y_infer);
  r.dx = to_nhwc(t, t.x, r.dx);
  r.dres = to_nhwc(t, t.residual, r.dres);
  // The documented bit order: the nChw16c index when a layout is blocked, else the NHWC index.
  for (size_t e = 0; act.relu && e < n; ++e) {
    const size_t k = any_blocked(t) ? index_in(t, kB, e) : e;
    r.mask.push_back(words[k / 32] >> (k % 32) & 1u);
  }
  return r;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float a : v) m = std::max(m, static_cast<double>(std::fabs(a)));
  return m;
}

// Summation order is the only difference: outputs within 1e-5 of the tensor's largest magnitude,
// statistics within 1e-6 relative.
void expect_close(const BnRun& a, const BnRun& b, const std::string& what) {
  auto near = [&](const std::vector<float>& got, const std::vector<float>& ref, const char* name) {
    EXPECT_TRUE(all_close(got, ref, 1e-5 * max_abs(ref), 0, what + " " + name));
  };
  near(a.y, b.y, "y");
  near(a.y_infer, b.y_infer, "infer y");
  for (auto [got, ref, name] : {std::tuple{&a.mean, &b.mean, "mean"}, {&a.invstd, &b.invstd, "invstd"},
                                {&a.rmean, &b.rmean, "running mean"}, {&a.rvar, &b.rvar, "running var"}})
    EXPECT_TRUE(all_close(*got, *ref, 1e-6 * max_abs(*ref), 1e-6, what + " " + name));
  EXPECT_EQ(a.mask, b.mask) << what << " mask";
  near(a.dx, b.dx, "dx");
  near(a.dres, b.dres, "dresidual");
  near(a.dgamma, b.dgamma, "dgamma");
  near(a.dbeta, b.dbeta, "dbeta");
}

// 3 x 27x27 x 32: three chunks, whose boundaries fall inside planes; 5 x 3x3 x 20: NHWC only; 16 x 1x1 x 512
// and 3 x 2x2 x 32: the last stage of a ResNet-18/34 on 32x32 images.
const BnShape kShapes[] = {{4, 8 * 8, 64}, {16, 1, 512}, {3, 2 * 2, 32}, {3, 7 * 7, 32},
                           {1, 16 * 16, 16}, {2, 5 * 5, 48}, {5, 3 * 3, 20}, {3, 27 * 27, 32}};

std::string describe(const BnShape& s) {
  auto name = [](ActLayout l) { return l == kN ? "nhwc" : "16c"; };
  return "n " + std::to_string(s.n) + " hw " + std::to_string(s.hw) + " c " + std::to_string(s.c) + " x " +
         name(s.x) + " y " + name(s.y) + " residual " + name(s.residual);
}

TEST(BatchNormBlocked, MatchesNhwcFastKernelInEveryLayout) {
  uint64_t seed = 100;
  for (const BnShape& shape : kShapes)
    for (int l = 0; l < (shape.c % 16 ? 1 : 8); ++l) {
      BnShape s = shape;
      s.x = l & 1 ? kB : kN;
      s.y = l & 2 ? kB : kN;
      s.residual = l & 4 ? kB : kN;
      for (bool residual : {false, true})
        for (const BnAct act : {BnAct(false), BnAct(true), BnAct::relu_capped(0.5f)}) {
          const bool want_dx = !(s.hw == 16 * 16 && residual);  // dx may be null
          seed += 10;
          const std::string what = describe(s) + (residual ? " +residual" : "") +
                                   (act.capped ? " +relu capped" : act.relu ? " +relu" : "");
          expect_close(run_bn(1, s, residual, act, want_dx, true, seed),
                       run_bn(1, s, residual, act, want_dx, false, seed), what);
        }
    }
}

// Any thread count gives the bits of one thread (with MatchesNhwcFastKernelInEveryLayout: the right ones).
TEST(BatchNormBlocked, SameBitsForAnyThreadCount) {
  const BnShape shapes[] = {{5, 31 * 31, 32, kB, kN, kB}, {5, 31 * 31, 32, kN, kB, kN}, {8, 32 * 32, 16, kB, kB, kB}};
  for (const BnShape& s : shapes) {
    const BnRun a = run_bn(1, s, true, true, true, true, 7);
    for (int threads : {2, 3}) {
      const BnRun b = run_bn(threads, s, true, true, true, true, 7);
      const std::string what = describe(s) + " threads " + std::to_string(threads);
      for (auto [x, y, name] : {std::tuple{&a.y, &b.y, "y"}, {&a.mean, &b.mean, "mean"},
                                {&a.invstd, &b.invstd, "invstd"}, {&a.rvar, &b.rvar, "running var"},
                                {&a.dx, &b.dx, "dx"}, {&a.dres, &b.dres, "dresidual"},
                                {&a.dgamma, &b.dgamma, "dgamma"}, {&a.dbeta, &b.dbeta, "dbeta"}})
        EXPECT_EQ(0, std::memcmp(x->data(), y->data(), sizeof(float) * x->size())) << what << " " << name;
      EXPECT_EQ(a.mask, b.mask) << what;
    }
  }
}

TEST(BatchNormBlocked, BlockedLayoutNeedsChannelsInSixteens) {
  const BnShape shapes[] = {{2, 9, 24, kB, kN, kN}, {2, 9, 24, kN, kB, kN}, {2, 9, 24, kN, kN, kB}};
  for (const BnShape& s : shapes) {
    const size_t n = s.rows() * s.c;
    std::vector<float> x(n, 1.f), y(n), c1(s.c, 1.f), c2(s.c), c3(s.c), c4(s.c, 1.f);
    EXPECT_THROW(batchnorm_forward_train_layout(1, s, x.data(), nullptr, c1.data(), c2.data(), 1e-5f, 0.1f, false,
                                                y.data(), nullptr, c2.data(), c3.data(), c2.data(), c4.data()),
                 Error)
        << describe(s);
    EXPECT_THROW(batchnorm_forward_infer_layout(1, s, x.data(), nullptr, c1.data(), c2.data(), c2.data(), c4.data(),
                                                1e-5f, false, y.data()),
                 Error)
        << describe(s);
    EXPECT_THROW(batchnorm_backward_layout(1, s, x.data(), nullptr, x.data(), c1.data(), c2.data(), c4.data(),
                                           y.data(), nullptr, c2.data(), c3.data()),
                 Error)
        << describe(s);
  }
}

}  // namespace
}  // namespace cnn
