// The fast CPU backend's activation loops are branch-free (vectorised): kernels/cpu/fast.mk builds
// graph_fast.cpp without trapping math, without which g++ keeps the comparisons of act_derivative as branches
// and a backward pass over random inputs mispredicts every other element (ReLU6's backward ran 13x slower
// than its forward; docs/perf.md). Values are checked by the backend sweep; this checks the speed ratio.
#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/graph_fast.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

template <class F>
double best_ms(F f) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// One thread, 4M elements (16 MB per array: out of cache, so both passes run at memory speed when vectorised;
// the backward moves 1.5x the forward's bytes). Best of 7 each, alternating, so load hits both alike.
TEST(FastActivation, BackwardBranchFreeOnRandomInputs) {
  const size_t n = size_t{1} << 22;
  // x in [-4, 10]: 43% inside ReLU6's (0, 6), the rest outside, at random (LeakyRelu: 29% below 0).
  std::vector<float> x = test::random_vec(n, 7, -4.f, 10.f), dy = test::random_vec(n, 8), y(n), dx(n);
  for (const Activation& a : {Activation{ActKind::kClip, 0.f, 6.f}, Activation{ActKind::kLeakyRelu, 0.1f, 0.f}}) {
    const double fwd = best_ms([&] { activation_forward_fast(1, a, n, x.data(), y.data()); });
    const double bwd = best_ms([&] { activation_backward_fast(1, a, n, x.data(), dy.data(), dx.data(), false); });
    EXPECT_LT(bwd, 5 * fwd) << "kind " << static_cast<int>(a.kind) << ": backward " << bwd << " ms, forward " << fwd
                            << " ms: the backward loop branches per element (built with -ftrapping-math?)";
  }
}

}  // namespace
}  // namespace cnn
