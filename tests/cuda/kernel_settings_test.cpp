// The custom kernels' settings belong to the backend that launches them (GpuOptions, kept per compute stream:
// KernelSettings in kernels/cuda/cuda_common.h), not to the process: backends made with different settings and
// used in turn each keep their own. Here the 16-bit GEMM kernel; --deterministic is SplitK in
// input_reduce_test.cpp. Under the emulator the two GEMM kernels sum in the same order (same tiles, same k
// steps), so their results agree bit for bit; what tells them apart is their work: the wmma kernel meets at a
// rendezvous on every fragment operation, so it makes a different number of fiber switches.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/simt/simt.h"
#include "tests/common/half_test_util.h"

namespace cnn::test {
namespace {

std::unique_ptr<Backend> emu_with_tensor_cores(bool on) {
  GpuOptions o;
  o.tensor_core_gemm = on;
  return make_emu_backend(o);
}

struct Gemm {
  std::vector<float> dw;
  uint64_t fiber_switches;
};

// A bf16 linear layer's weight gradient, and the emulator's fiber switches while the GEMM ran.
Gemm weight_grad(Backend& be) {
  constexpr int m = 300, k = 40, n = 24;
  const auto x = to_bits(random_rounded(static_cast<size_t>(m) * k, 1, DType::kBF16), DType::kBF16);
  const auto dy = to_bits(random_rounded(static_cast<size_t>(m) * n, 2, DType::kBF16), DType::kBF16);
  void* d_x = be.alloc(2 * x.size());
  void* d_dy = be.alloc(2 * dy.size());
  float* d_dw = static_cast<float*>(be.alloc(sizeof(float) * n * k));
  be.upload(d_x, x.data(), 2 * x.size());
  be.upload(d_dy, dy.data(), 2 * dy.size());
  be.fill(d_dw, static_cast<size_t>(n) * k, 0.f);
  be.synchronize();
  const uint64_t before = simt::fiber_switches();
  be.linear_backward_weight(DType::kBF16, m, k, n, d_x, d_dy, d_dw, nullptr);
  be.synchronize();
  Gemm g{std::vector<float>(static_cast<size_t>(n) * k), simt::fiber_switches() - before};
  be.download(g.dw.data(), d_dw, sizeof(float) * g.dw.size());
  for (void* p : {d_x, d_dy, static_cast<void*>(d_dw)}) be.release(p);
  return g;
}

// The same kernel: the same work and the same result.
::testing::AssertionResult same_kernel(const Gemm& a, const Gemm& b) {
  if (a.fiber_switches != b.fiber_switches)
    return ::testing::AssertionFailure() << a.fiber_switches << " vs " << b.fiber_switches << " fiber switches";
  if (std::memcmp(a.dw.data(), b.dw.data(), sizeof(float) * a.dw.size()) != 0)
    return ::testing::AssertionFailure() << "different results";
  return ::testing::AssertionSuccess();
}

TEST(KernelSettings, TensorCoreGemmIsPerBackend) {
  if (const char* e = std::getenv("CNNTRAIN_CUDA_GEMM"); e && std::strcmp(e, "simt") == 0)
    GTEST_SKIP() << "CNNTRAIN_CUDA_GEMM=simt turns the tensor-core kernel off for every backend";
  // Each kernel alone.
  const auto wmma_alone = weight_grad(*emu_with_tensor_cores(true));
  const auto tile_alone = weight_grad(*emu_with_tensor_cores(false));
  ASSERT_NE(wmma_alone.fiber_switches, tile_alone.fiber_switches) << "the kernels cannot be told apart";
  // Both backends alive, used in turn: each keeps its own kernel.
  const auto wmma = emu_with_tensor_cores(true), tile = emu_with_tensor_cores(false);
  EXPECT_TRUE(same_kernel(weight_grad(*wmma), wmma_alone));
  EXPECT_TRUE(same_kernel(weight_grad(*tile), tile_alone));
  EXPECT_TRUE(same_kernel(weight_grad(*wmma), wmma_alone));
}

}  // namespace
}  // namespace cnn::test
