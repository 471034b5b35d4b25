// Sums over the training ranks that the trainer makes through its Collectives, on every implementation:
// MPI on the CPU backend, MPI on host copies of the emulated device (--comm.backend mpi) and the emulated
// NCCL on the emulated device. average_buffers (batch norm's running statistics before evaluation and
// checkpoints) leaves every rank with the exact mean in the backend's memory; allreduce_sum_host sums host
// numbers (loss and accuracy totals) over the same ranks. Inputs are small integers, so every sum is exact;
// the mean is the sum times 1/ranks, exact over 2 and 4 ranks and within an ulp of the quotient over 3.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/train/recipe.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

struct Impl {
  std::string name;
  std::function<std::unique_ptr<Backend>()> backend;
  std::function<std::unique_ptr<Collectives>(Backend&)> collectives;
};

std::vector<Impl> impls() {
  return {{"mpi", [] { return make_cpu_backend(1); }, [](Backend&) { return make_mpi_collectives(); }},
          {"host_staged", [] { return make_emu_backend(); }, [](Backend& be) { return make_host_staged_collectives(be); }},
          {"emu_nccl", [] { return make_emu_backend(); }, [](Backend& be) { return make_emu_collectives(be); }}};
}

class RankSums : public ::testing::TestWithParam<Impl> {};

// A small integer per element and rank.
float value(size_t i, int rank) { return static_cast<float>(static_cast<int>(i % 7) + rank - 3); }

TEST_P(RankSums, AverageBuffersLeavesEveryRankTheMean) {
  auto be = GetParam().backend();
  Net net(*be, Dims{4, 4, 3}, 2);
  net.add(make_conv2d("conv", 5, {3, 1, 1, false}));
  net.add(make_batchnorm("bn"));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 2));
  net.build(2, 1);
  const size_t n = net.num_buffers();
  ASSERT_EQ(n, 10u);
  std::vector<float> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = value(i, world_rank());
  be->upload(net.buffers(), mine.data(), sizeof(float) * n);
  auto comm = GetParam().collectives(*be);
  EXPECT_EQ(comm->ranks(), world_size());
  average_buffers(*be, net, comm.get());
  std::vector<float> got(n);
  be->download(got.data(), net.buffers(), sizeof(float) * n);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int r = 0; r < world_size(); ++r) sum += value(i, r);
    EXPECT_FLOAT_EQ(got[i], sum / static_cast<float>(world_size())) << "buffer element " << i;
  }
}

TEST_P(RankSums, HostSumsAddEveryRanksNumbers) {
  auto be = GetParam().backend();
  auto comm = GetParam().collectives(*be);
  double sums[3] = {1.0 + world_rank(), 0.5, -2.0 * world_rank()};
  comm->allreduce_sum_host(sums, 3, "test totals");
  const double w = world_size();
  EXPECT_EQ(sums[0], w + w * (w - 1) / 2);
  EXPECT_EQ(sums[1], 0.5 * w);
  EXPECT_EQ(sums[2], -w * (w - 1));
}

INSTANTIATE_TEST_SUITE_P(Collectives, RankSums, ::testing::ValuesIn(impls()),
                         [](const ::testing::TestParamInfo<Impl>& p) { return p.param.name; });

}  // namespace
}  // namespace cnn
