// NCCL on a real GPU: one rank (NCCL allows one rank per GPU, so this is what one GPU can check) sums through
// the same Collectives code the trainer uses. `make gpu-test` runs it where there is a GPU; elsewhere it skips
// with the reason (fails under CNNTRAIN_REQUIRE_GPU=1). The multi-rank NCCL path runs in CI against the emulated
// NCCL (tests/mpi).
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

TEST(NcclOneRank, AllreduceAndGradSyncOnTheGpu) {
  std::string reason;
  auto be = make_gpu_test_backend(false, &reason);
  if (!be) {
    if (gpu_required()) FAIL() << reason;
    GTEST_SKIP() << reason;
  }
#ifdef CNN_WITH_CUDA
  auto nccl = make_cuda_collectives(*be);
  auto x = random_vec(1001, 5);
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  be->upload(d_x, x.data(), sizeof(float) * x.size());
  nccl->allreduce_sum(d_x, x.size(), "test allreduce");
  std::vector<float> got(x.size());
  be->download(got.data(), d_x, sizeof(float) * x.size());
  EXPECT_TRUE(all_close(got, x, 0, 0, "one-rank allreduce"));
  GradSyncOptions o;
  o.bucket_bytes = 256 * sizeof(float);
  auto sync = nccl->make_grad_sync(d_x, x.size(), o);
  sync->on_ready(500);
  sync->finish();
  be->download(got.data(), d_x, sizeof(float) * x.size());
  EXPECT_TRUE(all_close(got, x, 0, 0, "one-rank gradient buckets"));
  EXPECT_GT(sync->counters().launched_in_backward, 0);
  sync.reset();
  nccl.reset();
  be->release(d_x);
#endif
}

}  // namespace
}  // namespace cnn::test
