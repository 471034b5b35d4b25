// The fast CPU max pooling (kernels/cpu/fast_cpu.cpp) against the reference kernels (kernels/pooling_cpu.cpp),
// bit for bit, on inputs full of ties, NaNs and signed zeros: the 2x2 windows' vector paths (C below 8, whose
// lanes run into the next pixels, with the row's last pixels on the plain loop; C of 8 and more, the last block
// moved back; C of 4 and less, whose backward scatters), odd sizes (uncovered last row and column), overlapping
// 2x2 windows (stride 1) and a padded 3x3 window (the general paths), with and without the fused ReLU, on one
// and two threads. The backend sweep (tests/backend) compares random values only.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fast_cpu.h"
#include "kernels/pooling.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// Few distinct values, so that windows tie often, with NaNs, -0 and +0 among them.
std::vector<float> tie_heavy(size_t n, uint64_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {-1.f, -0.f, 0.f, 0.5f, 0.5f, 1.f, 1.f, 2.f, nan};
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = pool[rng() % (sizeof(pool) / sizeof(pool[0]))];
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

struct Shape {
  int n, h, w, c, k, stride, pad;
};

TEST(FastMaxPool, BitExactWithReferenceOnTiesNanAndOddShapes) {
  const Shape shapes[] = {
      {64, 28, 28, 6, 2, 2, 0},   // LeNet-5's first pooling (on two threads)
      {16, 10, 10, 16, 2, 2, 0},  // its second
      {5, 9, 7, 6, 2, 2, 0},      // odd H and W
      {3, 7, 9, 5, 2, 2, 0},
      {3, 6, 5, 7, 2, 2, 0},
      {2, 5, 5, 1, 2, 2, 0},      // C <= 4: the backward scatters
      {3, 8, 6, 3, 2, 2, 0},
      {2, 4, 6, 4, 2, 2, 0},
      {3, 7, 5, 13, 2, 2, 0},     // two blocks, the second moved back
      {2, 5, 8, 20, 2, 2, 0},
      {2, 3, 3, 8, 2, 2, 0},
      {2, 2, 2, 6, 2, 2, 0},      // one window per row: its only pixel on the plain loop
      {3, 7, 6, 6, 2, 1, 0},      // overlapping 2x2 windows
      {2, 5, 5, 13, 2, 1, 0},
      {2, 9, 8, 6, 3, 2, 1},      // padded 3x3 (ResNet stem)
  };
  uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (bool relu : {false, true})
      for (int threads : {1, 2}) {
        PoolDesc d;
        d.n = s.n, d.h = s.h, d.w = s.w, d.c = s.c, d.r = d.s = s.k, d.stride = s.stride, d.pad = s.pad;
        const size_t in = static_cast<size_t>(d.n) * d.h * d.w * d.c;
        const size_t out = static_cast<size_t>(d.n) * d.p() * d.q() * d.c;
        const std::string what = std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + "x" +
                                 std::to_string(s.c) + " window " + std::to_string(s.k) + " stride " +
                                 std::to_string(s.stride) + (relu ? " relu" : "") + ", " + std::to_string(threads) +
                                 " threads";
        const std::vector<float> x = tie_heavy(in, ++seed), dy = tie_heavy(out, ++seed);
        std::vector<float> y(out, 7.f), ref_y(out), dx(in, 7.f), ref_dx(in);
        std::vector<int32_t> arg(out, -7), ref_arg(out);
        maxpool_forward_cpu(d, x.data(), relu, ref_y.data(), ref_arg.data());
        maxpool_forward_fast(threads, d, x.data(), relu, y.data(), arg.data());
        EXPECT_TRUE(same_bits(y, ref_y)) << what;
        EXPECT_TRUE(same_bits(arg, ref_arg)) << what;
        const float* relu_y = relu ? ref_y.data() : nullptr;
        maxpool_backward_cpu(d, dy.data(), relu_y, ref_arg.data(), ref_dx.data());
        maxpool_backward_fast(threads, d, dy.data(), relu_y, ref_arg.data(), dx.data());
        EXPECT_TRUE(same_bits(dx, ref_dx)) << what;
      }
}

}  // namespace
}  // namespace cnn
