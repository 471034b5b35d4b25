// The fast CPU backend (oneDNN convolution/matmul, OpenMP element-wise ops) against the reference kernels, on
// ragged shapes and several thread counts; run-to-run bit-exactness for a fixed thread count.
#include <cstdlib>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/conv2d.h"
#include "kernels/cpu_backend.h"
#include "kernels/linear.h"
#include "kernels/optimizer.h"
#include "kernels/pooling.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

using test::all_close;
using test::random_vec;

constexpr double kAtol = 2e-4, kRtol = 1e-4;

ConvDesc conv(int n, int h, int w, int c, int k, int r, int s, int sh, int sw, int ph, int pw) {
  ConvDesc d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.r = r, d.s = s;
  d.stride_h = sh, d.stride_w = sw, d.pad_h = ph, d.pad_w = pw;
  return d;
}

const std::vector<ConvDesc>& conv_cases() {
  static const std::vector<ConvDesc> v = {
      conv(3, 7, 9, 5, 13, 3, 3, 1, 1, 1, 1),    // ragged everything
      conv(2, 28, 28, 1, 16, 3, 3, 1, 1, 1, 1),  // fmnist_cnn conv1
      conv(2, 28, 28, 1, 6, 5, 5, 1, 1, 2, 2),   // lenet5 conv1
      conv(3, 14, 14, 6, 16, 5, 5, 1, 1, 0, 0),  // lenet5 conv2
      conv(2, 9, 11, 17, 33, 3, 3, 2, 2, 1, 1),  // stride 2, odd sizes
      conv(1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1),   // the >= 64-channel case
      conv(3, 10, 7, 16, 32, 1, 1, 2, 2, 0, 0),  // 1x1 projection, stride 2
      conv(2, 9, 8, 3, 5, 3, 2, 2, 1, 0, 1),     // rectangular kernel, unequal strides
  };
  return v;
}

class FastKernels : public ::testing::TestWithParam<int> {
 protected:
  // Small test shapes would otherwise run on one thread (kernels/dnnl_ops.cpp); exercise the parallel paths.
  void SetUp() override { setenv("CNNTRAIN_MIN_PARALLEL_MFLOP", "0", 1); }
  void TearDown() override { unsetenv("CNNTRAIN_MIN_PARALLEL_MFLOP"); }
};

TEST_P(FastKernels, ConvMatchesReference) {
  auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);
  uint64_t seed = 100;
  for (const ConvDesc& d : conv_cases()) {
    const std::string name = "conv n" + std::to_string(d.n) + " " + std::to_string(d.h) + "x" + std::to_string(d.w) +
                             " c" + std::to_string(d.c) + " k" + std::to_string(d.k) + " r" + std::to_string(d.r);
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, nw = static_cast<size_t>(d.k) * d.r * d.s * d.c;
    const size_t ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.k;
    auto x = random_vec(nx, ++seed), w = random_vec(nw, ++seed), b = random_vec(d.k, ++seed);
    auto dy = random_vec(ny, ++seed), dw0 = random_vec(nw, ++seed), db0 = random_vec(d.k, ++seed);
    for (bool bias : {true, false}) {
      std::vector<float> y(ny), y_ref(ny);
      be->conv2d_forward(d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      conv2d_forward_cpu(d, x.data(), w.data(), bias ? b.data() : nullptr, y_ref.data());
      EXPECT_TRUE(all_close(y, y_ref, kAtol, kRtol, name + " forward"));
      // Parameter gradients accumulate onto what is there.
      std::vector<float> dw = dw0, dw_ref = dw0, db = db0, db_ref = db0;
      be->conv2d_backward_filter(d, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      conv2d_backward_filter_cpu(d, x.data(), dy.data(), dw_ref.data(), bias ? db_ref.data() : nullptr);
      EXPECT_TRUE(all_close(dw, dw_ref, kAtol, kRtol, name + " backward filter"));
      EXPECT_TRUE(all_close(db, db_ref, kAtol, kRtol, name + " backward bias"));
    }
    std::vector<float> dx(nx, 7.f), dx_ref(nx);
    be->conv2d_backward_data(d, dy.data(), w.data(), dx.data());
    conv2d_backward_data_cpu(d, dy.data(), w.data(), dx_ref.data());
    EXPECT_TRUE(all_close(dx, dx_ref, kAtol, kRtol, name + " backward data"));
  }
}

TEST_P(FastKernels, LinearMatchesReference) {
  auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);
  const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 1568, 128}, {33, 400, 120}, {5, 84, 10}, {128, 250, 31}};
  uint64_t seed = 500;
  for (auto& s : shapes) {
    const int m = s[0], k = s[1], n = s[2];
    const std::string name = "linear " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    auto x = random_vec(static_cast<size_t>(m) * k, ++seed), w = random_vec(static_cast<size_t>(n) * k, ++seed);
    auto b = random_vec(n, ++seed), dy = random_vec(static_cast<size_t>(m) * n, ++seed);
    auto dw0 = random_vec(static_cast<size_t>(n) * k, ++seed), db0 = random_vec(n, ++seed);
    for (bool bias : {true, false}) {
      std::vector<float> y(static_cast<size_t>(m) * n), y_ref(y.size());
      be->linear_forward(m, k, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
      linear_forward_cpu(m, k, n, x.data(), w.data(), bias ? b.data() : nullptr, y_ref.data());
      EXPECT_TRUE(all_close(y, y_ref, kAtol, kRtol, name + " forward"));
      std::vector<float> dw = dw0, dw_ref = dw0, db = db0, db_ref = db0;
      be->linear_backward_weight(m, k, n, x.data(), dy.data(), dw.data(), bias ? db.data() : nullptr);
      linear_backward_weight_cpu(m, k, n, x.data(), dy.data(), dw_ref.data(), bias ? db_ref.data() : nullptr);
      EXPECT_TRUE(all_close(dw, dw_ref, kAtol, kRtol, name + " backward weight"));
      EXPECT_TRUE(all_close(db, db_ref, kAtol, kRtol, name + " backward bias"));
    }
    std::vector<float> dx(static_cast<size_t>(m) * k, 7.f), dx_ref(dx.size());
    be->linear_backward_data(m, k, n, dy.data(), w.data(), dx.data());
    linear_backward_data_cpu(m, k, n, dy.data(), w.data(), dx_ref.data());
    EXPECT_TRUE(all_close(dx, dx_ref, kAtol, kRtol, name + " backward data"));
  }
}

TEST_P(FastKernels, ElementwisePoolingOptimizerMatchReference) {
  auto be = make_cpu_backend(GetParam(), CpuKernels::kFast);
  for (size_t n : {size_t{1}, size_t{1000}, size_t{100003}}) {
    auto x = random_vec(n, n), dy = random_vec(n, n + 1);
    std::vector<float> y(n), y_ref(n), dx(n), dx_ref(n);
    be->relu_forward(n, x.data(), y.data());
    relu_forward_cpu(n, x.data(), y_ref.data());
    EXPECT_EQ(y, y_ref);
    be->relu_backward(n, y.data(), dy.data(), dx.data());
    relu_backward_cpu(n, y_ref.data(), dy.data(), dx_ref.data());
    EXPECT_EQ(dx, dx_ref);
    for (bool nesterov : {false, true}) {
      auto w = random_vec(n, n + 2), v = random_vec(n, n + 3), w_ref = w, v_ref = v;
      be->sgd_update(n, w.data(), dy.data(), v.data(), 0.1f, 0.9f, 5e-4f, nesterov);
      sgd_update_cpu(n, w_ref.data(), dy.data(), v_ref.data(), 0.1f, 0.9f, 5e-4f, nesterov);
      EXPECT_TRUE(all_close(w, w_ref, 1e-6, 1e-6, "sgd w"));
      EXPECT_TRUE(all_close(v, v_ref, 1e-6, 1e-6, "sgd v"));
    }
  }
  struct P { int n, h, w, c, k, stride, pad; };
  for (P p : {P{3, 7, 9, 5, 2, 2, 0}, P{2, 28, 28, 16, 2, 2, 0}, P{4, 9, 8, 33, 3, 2, 1}, P{2, 8, 8, 64, 8, 8, 0}}) {
    PoolDesc d;
    d.n = p.n, d.h = p.h, d.w = p.w, d.c = p.c, d.r = d.s = p.k, d.stride = p.stride, d.pad = p.pad;
    const size_t nx = static_cast<size_t>(d.n) * d.h * d.w * d.c, ny = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
    auto x = random_vec(nx, nx), dy = random_vec(ny, ny);
    std::vector<float> y(ny), y_ref(ny), dx(nx, 3.f), dx_ref(nx);
    std::vector<int32_t> a(ny), a_ref(ny);
    be->maxpool_forward(d, x.data(), y.data(), a.data());
    maxpool_forward_cpu(d, x.data(), y_ref.data(), a_ref.data());
    EXPECT_EQ(y, y_ref);
    EXPECT_EQ(a, a_ref);
    be->maxpool_backward(d, dy.data(), a.data(), dx.data());
    maxpool_backward_cpu(d, dy.data(), a_ref.data(), dx_ref.data());
    EXPECT_EQ(dx, dx_ref);
  }
}

// Checkpoint resume relies on the same inputs giving the same bits (for a fixed thread count).
TEST_P(FastKernels, RunToRunBitExact) {
  const ConvDesc d = conv(16, 16, 16, 32, 32, 3, 3, 1, 1, 1, 1);
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
