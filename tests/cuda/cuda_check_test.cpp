// CUDA_CHECK ends the job with the failing expression, file:line and the CUDA error, also for a launch
// the backend makes.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"

namespace cnn::emu {
namespace {

TEST(CudaCheckDeathTest, NamesExpressionLocationAndError) {
  EXPECT_DEATH(CUDA_CHECK(cudaMemcpy(nullptr, nullptr, 4, cudaMemcpyDeviceToHost)),
               "CUDA error cudaErrorInvalidValue .*cudaMemcpy\\(nullptr, nullptr, 4, cudaMemcpyDeviceToHost\\) at "
               "tests/cuda/cuda_check_test.cpp:[0-9]+");
}

TEST(CudaCheckDeathTest, LaunchErrorInsideTheBackend) {
  // 2^22 + 1 output features need 65537 column tiles, over the grid's y limit: the launch is refused before
  // any thread runs, so the null pointers are never touched.
  auto be = make_emu_backend();
  EXPECT_DEATH(be->linear_forward(DType::kF32, 1, 1, (1 << 22) + 1, nullptr, nullptr, nullptr, nullptr),
               "cudaErrorInvalidConfiguration.*kernels/cuda/cuda_backend.cu:[0-9]+");
}

// A successful call returns normally with the call made exactly once (a macro that re-evaluated its argument
// to report it would repeat launches and allocations), and the macro is one statement (if/else without braces).
TEST(CudaCheck, SuccessMakesTheCallOnceAndReturns) {
  int calls = 0;
  auto call = [&calls] {
    ++calls;
    return cudaSuccess;
  };
  if (calls == 0)
    CUDA_CHECK(call());
  else
    ADD_FAILURE() << "unreachable";
  EXPECT_EQ(calls, 1);
  CUDA_CHECK(call());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace cnn::emu
