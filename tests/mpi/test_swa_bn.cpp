// SWA's batch-norm recomputation (recompute_bn_statistics, src/train/swa.h) over the ranks: each rank takes
// its slice of every global batch, as the sampler gives them; with ghost groups (--bn.group_size) or
// synchronised batch norm (--bn.sync) every rank ends with what one process computes over the whole global
// batches, so the result does not depend on the rank count; plain batch norm (statistics of each rank's share)
// does depend on it, which the same comparison must show, or it proves nothing. On the CPU backend through MPI
// and on the emulated CUDA backend through the emulated NCCL.
#include <memory>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/train/swa.h"
#include "tests/common/test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace cnn {
namespace {

constexpr int kH = 5, kW = 4, kC = 3, kClasses = 4;
constexpr int kGlobal = 16;  // divisible by 1, 2 and 4 ranks, and by the ghost group
constexpr int64_t kBatches = 3;

// The buffers after the pass over kBatches global batches as rank `rank` of `world` (comm null: one process).
std::vector<float> recompute(Backend& be, Collectives* comm, int rank, int world, const BnOptions& bn) {
  const int local = kGlobal / world;
  Net net(be, Dims{kH, kW, kC}, kClasses);
  net.add(make_batchnorm("bn1", bn));
  net.add(make_conv2d("conv1", 4, {3, 1, 1, false}));
  net.add(make_batchnorm("bn2", bn, true));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", kClasses));
  net.build(local, 5);  // the same weights on every rank and in the one process
  StepBuffers buf = alloc_step_buffers(be, net, local);
  BnPass p;
  p.batches = kBatches;
  p.local_batch = local;
  p.comm = comm;
  recompute_bn_statistics(be, net, p, buf, [&](int64_t i) {
    std::vector<float> x;
    for (int s = rank * local; s < (rank + 1) * local; ++s) {
      std::vector<float> v = test::random_vec(kH * kW * kC, 100 * i + s);
      for (size_t k = 0; k < v.size(); ++k) v[k] += 0.5f * (k % kC) + 0.1f * s;  // groups differ in mean
      x.insert(x.end(), v.begin(), v.end());
    }
    be.upload(buf.x, x.data(), sizeof(float) * x.size());
  });
  std::vector<float> out(net.num_buffers());
  be.download(out.data(), net.buffers(), sizeof(float) * out.size());
  free_step_buffers(be, buf);
  return out;
}

void expect_rank_independent(Backend& be, Collectives* comm, const char* what) {
  BnOptions ghost;
  ghost.group = 4;
  BnOptions sync;
  sync.sync = true;
  for (const BnOptions& bn : {ghost, sync}) {
    const std::string name = std::string(what) + (bn.sync ? ", sync" : ", ghost groups of 4");
    const std::vector<float> mine = recompute(be, comm, world_rank(), world_size(), bn);
    test::expect_same_on_every_rank(mine, name.c_str());
    EXPECT_TRUE(test::all_close(mine, recompute(be, nullptr, 0, 1, bn), 1e-6, 1e-5, name + ": N ranks vs 1"));
  }
  const std::vector<float> plain = recompute(be, comm, world_rank(), world_size(), {});
  EXPECT_FALSE(test::all_close(plain, recompute(be, nullptr, 0, 1, {}), 1e-6, 1e-5, "plain").operator bool())
      << "plain batch norm's statistics came out rank-count independent: the comparison proves nothing";
}

TEST(SwaBatchNorm, CpuRanksComputeWhatOneProcessComputes) {
  auto be = make_cpu_backend(1);
  auto mpi = make_mpi_collectives();
  expect_rank_independent(*be, mpi.get(), "cpu/MPI");
}

TEST(SwaBatchNorm, EmuNcclRanksComputeWhatOneProcessComputes) {
  auto emu = make_emu_backend();
  auto nccl = make_emu_collectives(*emu);
  expect_rank_independent(*emu, nccl.get(), "emu/NCCL");
}

}  // namespace
}  // namespace cnn
