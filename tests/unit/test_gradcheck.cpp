// Finite-difference checks of every layer's input and parameter gradients, plus forward results against
// straightforward double-precision loops, on ragged shapes.
#include <functional>

#include "kernels/backend.h"
#include "kernels/conv2d.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;

// Loss L = sum(y * r) in double; dL/dy = r.
double dot(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// Central differences of f with respect to every element of v, compared with `analytic`.
::testing::AssertionResult fd_check(std::vector<float>& v, const std::vector<float>& analytic,
                                    const std::function<double()>& f, const std::string& what, float eps = 1e-2f) {
  std::vector<double> numeric(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float keep = v[i];
    v[i] = keep + eps;
    double up = f();
    v[i] = keep - eps;
    double down = f();
    v[i] = keep;
    numeric[i] = (up - down) / (2.0 * eps);
  }
  return all_close(analytic, numeric, 5e-3, 1e-2, what);
}

struct LayerCase {
  std::unique_ptr<Layer> layer;
  Dims in;
  int n;
};

// Runs the generic check: input gradient and each parameter's gradient of L = sum(y * r).
// Outlives every layer (layers free their scratch through it).
Backend* cpu() {
  static auto be = make_cpu_backend(1);
  return be.get();
}

void check_layer(LayerCase c, uint64_t seed, float x_lo = -1.f, bool distinct_inputs = false) {
  Backend* be = cpu();
  Layer& l = *c.layer;
  Dims out = l.setup(c.in);
  const int n = c.n;
  std::vector<float> x = random_vec(c.in.size() * n, seed, x_lo, 1.f);
  if (distinct_inputs) {  // max pooling: spread values so that no window has a near tie
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % x.size()) * 0.05f - 1.f;
  }
  auto specs = l.param_specs();
  std::vector<std::vector<float>> p, g;
  std::vector<float*> pp, gp;
  for (size_t i = 0; i < specs.size(); ++i) {
    p.push_back(random_vec(specs[i].size(), seed + 10 + i));
    g.push_back(std::vector<float>(specs[i].size(), 0.f));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    pp.push_back(p[i].data());
    gp.push_back(g[i].data());
  }
  l.bind(pp, gp);
  l.allocate(*be, n);
  std::vector<float> y(out.size() * n), dx(x.size());
  std::vector<float> r = random_vec(y.size(), seed + 99);
  auto loss = [&] {
    l.forward(*be, x.data(), l.is_view() ? x.data() : y.data(), n, true);
    return dot(l.is_view() ? x : y, r);
  };
  loss();
  l.backward(*be, x.data(), y.data(), r.data(), dx.data(), n);
  if (!l.is_view()) EXPECT_TRUE(fd_check(x, dx, loss, l.describe() + " dx"));
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<float> analytic = g[i];
    EXPECT_TRUE(fd_check(p[i], analytic, loss, l.describe() + " d" + specs[i].name));
  }
  // Parameter gradients accumulate: a second backward doubles them.
  if (!specs.empty()) {
    std::vector<float> first = g[0];
    loss();
    l.backward(*be, x.data(), y.data(), r.data(), dx.data(), n);
    for (auto& v : first) v *= 2;
    EXPECT_TRUE(all_close(g[0], first, 1e-5, 1e-5, "accumulated " + specs[0].name));
  }
}

TEST(GradCheck, ConvStride1Pad1Bias) { check_layer({make_conv2d("c", 5, {3, 1, 1, true}), {6, 7, 3}, 2}, 1); }
TEST(GradCheck, ConvStride2Pad1) { check_layer({make_conv2d("c", 4, {3, 2, 1, true}), {7, 6, 2}, 3}, 2); }
TEST(GradCheck, ConvNoBiasNoPad5x5) { check_layer({make_conv2d("c", 3, {5, 1, 0, false}), {8, 9, 2}, 2}, 3); }
TEST(GradCheck, Conv1x1Stride2) { check_layer({make_conv2d("c", 6, {1, 2, 0, true}), {5, 5, 4}, 2}, 4); }
TEST(GradCheck, Linear) { check_layer({make_linear("fc", 7), {3, 2, 5}, 4}, 5); }
TEST(GradCheck, LinearNoBias) { check_layer({make_linear("fc", 3, false), {1, 1, 11}, 3}, 6); }
// Inputs kept away from the kink at 0, where the derivative is undefined.
TEST(GradCheck, Relu) { check_layer({make_relu("r"), {3, 4, 5}, 2}, 7, 0.05f); }
TEST(GradCheck, ReluNegativeHalf) {
  auto be = make_cpu_backend(1);
  std::vector<float> x = {-2, -0.5f, 0.5f, 3}, y(4), dy = {1, 2, 3, 4}, dx(4);
  be->relu_forward(4, x.data(), y.data());
  be->relu_backward(4, y.data(), dy.data(), dx.data());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0.5f, 3}));
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 3, 4}));
}
TEST(GradCheck, MaxPool2x2) { check_layer({make_maxpool("p", 2, 2), {6, 7, 3}, 2}, 8, -1.f, true); }
TEST(GradCheck, MaxPool3x3Stride2Pad1) { check_layer({make_maxpool("p", 3, 2, 1), {7, 5, 2}, 2}, 9, -1.f, true); }
TEST(GradCheck, Flatten) {
  auto l = make_flatten("f");
  Dims out = l->setup({3, 4, 5});
  EXPECT_EQ(out, (Dims{1, 1, 60}));
  EXPECT_TRUE(l->is_view());
}

TEST(GradCheck, SoftmaxCrossEntropyWithSmoothing) {
  auto be = make_cpu_backend(1);
  const int n = 5, k = 7;
  std::vector<float> z = random_vec(n * k, 11, -3.f, 3.f), dz(n * k);
  std::vector<int32_t> y = {0, 6, 3, 3, 1};
  const float scale = 0.25f, eps = 0.1f;
  auto loss = [&] {
    double s = 0;
    int64_t c = 0;
    be->softmax_xent(n, k, z.data(), y.data(), eps, scale, nullptr, &s, &c);
    return s * scale;
  };
  double s = 0;
  int64_t c = 0;
  be->softmax_xent(n, k, z.data(), y.data(), eps, scale, dz.data(), &s, &c);
  EXPECT_TRUE(fd_check(z, dz, loss, "softmax-xent dlogits", 1e-3f));
  // Against the textbook formula.
  double want = 0;
  int64_t want_c = 0;
  for (int i = 0; i < n; ++i) {
    double m = -1e30, sum = 0;
    int arg = 0;
    for (int j = 0; j < k; ++j)
      if (z[i * k + j] > m) m = z[i * k + j], arg = j;
    for (int j = 0; j < k; ++j) sum += std::exp(z[i * k + j] - m);
    for (int j = 0; j < k; ++j) {
      double t = (j == y[i] ? 1 - eps : 0) + eps / k;
      want -= t * (z[i * k + j] - m - std::log(sum));
    }
    want_c += arg == y[i];
  }
  EXPECT_NEAR(s, want, 1e-5 * std::fabs(want));
  EXPECT_EQ(c, want_c);
}

TEST(ConvForward, MatchesDirectLoops) {
  ConvDesc d;
  d.n = 2, d.h = 9, d.w = 7, d.c = 3, d.k = 5, d.r = 3, d.s = 2, d.stride_h = 2, d.stride_w = 1, d.pad_h = 1,
  d.pad_w = 1;
  auto x = random_vec(static_cast<size_t>(d.n) * d.h * d.w * d.c, 21);
  auto w = random_vec(static_cast<size_t>(d.k) * d.r * d.s * d.c, 22);
  auto b = random_vec(d.k, 23);
  std::vector<float> y(static_cast<size_t>(d.n) * d.p() * d.q() * d.k);
  conv2d_forward_cpu(d, x.data(), w.data(), b.data(), y.data());
  std::vector<double> ref(y.size());
  for (int n = 0; n < d.n; ++n)
    for (int p = 0; p < d.p(); ++p)
      for (int q = 0; q < d.q(); ++q)
        for (int k = 0; k < d.k; ++k) {
          double acc = b[k];
          for (int r = 0; r < d.r; ++r)
            for (int s = 0; s < d.s; ++s)
              for (int c = 0; c < d.c; ++c) {
                int h = p * d.stride_h - d.pad_h + r, ww = q * d.stride_w - d.pad_w + s;
                if (h < 0 || h >= d.h || ww < 0 || ww >= d.w) continue;
                acc += static_cast<double>(x[((n * d.h + h) * d.w + ww) * d.c + c]) * w[((k * d.r + r) * d.s + s) * d.c + c];
              }
          ref[((n * d.p() + p) * d.q() + q) * d.k + k] = acc;
        }
  EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-5, "conv forward"));
}

// The whole net: parameter gradients of the mean cross-entropy, through Net::backward.
TEST(GradCheck, WholeNet) {
  auto be = make_cpu_backend(1);
  Net net(*be, Dims{6, 6, 2}, 3);
  net.add(make_conv2d("conv", 4, {3, 1, 1, true}));
  net.add(make_relu("relu"));
  net.add(make_maxpool("pool", 2, 2));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 3));
  const int n = 3;
  net.build(n, 5);
  auto x = random_vec(6 * 6 * 2 * n, 31);
  std::vector<int32_t> y = {0, 2, 1};
  std::vector<float> dl(n * 3);
  std::vector<float> params(net.params(), net.params() + net.num_params());
  auto loss = [&] {
    std::copy(params.begin(), params.end(), net.params());
    double s = 0;
    int64_t c = 0;
    const float* z = static_cast<const float*>(net.forward(x.data(), n, true));  // an fp32 net
    be->softmax_xent(n, 3, z, y.data(), 0.f, 1.f / n, nullptr, &s, &c);
    return s / n;
  };
  loss();
  net.zero_grads();
  double s = 0;
  int64_t c = 0;
  be->softmax_xent(n, 3, static_cast<const float*>(net.forward(x.data(), n, true)), y.data(), 0.f, 1.f / n,
                   dl.data(), &s, &c);
  std::vector<size_t> ready;
  net.backward(dl.data(), n, [&](size_t off) { ready.push_back(off); });
  std::vector<float> analytic(net.grads(), net.grads() + net.num_params());
  EXPECT_TRUE(fd_check(params, analytic, loss, "net param grads", 1e-3f));
  // Readiness offsets never increase and end at 0.
  ASSERT_FALSE(ready.empty());
  for (size_t i = 1; i < ready.size(); ++i) EXPECT_LE(ready[i], ready[i - 1]);
  EXPECT_EQ(ready.back(), 0u);
}

}  // namespace
}  // namespace cnn
