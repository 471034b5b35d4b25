// Data-parallel training with the emulated CUDA backend (--device emu) through the NCCL code path
// (src/comm/nccl_collectives.cu against the emulated NCCL): every rank ends with identical weights, equal
// within 1e-5 relative to one CPU process training on the same global batches, and gradient buckets start
// while backward is still running (counted, not timed). `make test` also runs this suite with deferred
// emulator streams (CNNTRAIN_SIMT_DEFER), where a missing event wait would reorder the buckets' inputs.
#include <cstring>

#include "io/sampler.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace cnn {
namespace {

constexpr int kH = 10, kW = 10, kClasses = 4;
constexpr int64_t kGlobal = 12;  // divisible by 1, 2, 3 and 4 ranks

struct Result {
  std::vector<double> losses;  // global mean per step
  std::vector<float> weights;
  GradSyncCounters counters;
};

// `steps` steps as rank `rank` of `world` on `be`; `comm` null: a single process.
Result train(Backend& be, Collectives* comm, int rank, int world, int steps) {
  Net net(be, Dims{kH, kW, 1}, kClasses);
  net.add(make_conv2d("conv1", 6, {3, 1, 1, true}));
  net.add(make_relu("relu1"));
  net.add(make_maxpool("pool1", 2, 2));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", kClasses));
  net.build(static_cast<int>(kGlobal / world), 3);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  auto opt = make_optimizer(oc, be, net);
  GradSyncOptions go;
  go.bucket_bytes = 128 * sizeof(float);  // several buckets, so some start during backward
  std::unique_ptr<GradSync> sync;
  if (comm) sync = comm->make_grad_sync(net.grads(), net.num_params(), go);
  StepBuffers buf = alloc_step_buffers(be, net);
  Sampler sampler(60, kGlobal, 9);
  Result r;
  for (int s = 0; s < steps; ++s) {
    const int64_t epoch = s / sampler.steps_per_epoch(), step = s % sampler.steps_per_epoch();
    const auto ids = sampler.rank_slice(epoch, step, rank, world);
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int64_t id : ids) {
      auto v = test::random_vec(kH * kW, 500 + id);
      x.insert(x.end(), v.begin(), v.end());
      y.push_back(static_cast<int32_t>((v[0] > 0) + 2 * (v[11] > 0)));
    }
    be.upload(buf.x, x.data(), x.size() * sizeof(float));
    be.upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    StepStats st;
    train_step(be, net, *opt, sync.get(), buf, static_cast<int>(ids.size()), kGlobal, 0.f, 0.05, st);
    double loss = 0;
    int64_t correct = 0;
    take_loss_totals(be, buf, &loss, &correct);
    if (comm) allreduce_sum(&loss, 1);
    r.losses.push_back(loss / kGlobal);
  }
  r.weights.resize(net.num_params());
  be.download(r.weights.data(), net.params(), sizeof(float) * net.num_params());
  if (sync) r.counters = sync->counters();
  free_step_buffers(be, buf);
  return r;
}

TEST(EmuDataParallel, NcclPathRanksAgreeAndMatchOneCpuProcess) {
  const int steps = 7;  // crosses an epoch boundary (5 steps per epoch)
  auto emu = make_emu_backend();
  Result e;
  {
    auto nccl = make_emu_collectives(*emu);
    EXPECT_NE(nccl->describe().find("emulated NCCL"), std::string::npos) << nccl->describe();
    e = train(*emu, nccl.get(), world_rank(), world_size(), steps);
  }
  auto cpu = make_cpu_backend(1);
  const Result c = train(*cpu, nullptr, 0, 1, steps);
  test::expect_same_on_every_rank(e.weights, "emu (NCCL) weights");
  EXPECT_TRUE(test::all_close(e.losses, c.losses, 0, 1e-5, "emu (NCCL, N ranks) vs cpu (1 process) losses"));
  EXPECT_TRUE(test::all_close(e.weights, c.weights, 1e-6, 1e-5, "emu (NCCL, N ranks) vs cpu (1 process) weights"));
  EXPECT_EQ(e.counters.steps, steps);
  EXPECT_GT(e.counters.buckets, steps);
  EXPECT_GT(e.counters.launched_in_backward, 0) << "no gradient bucket started before backward finished";
}

}  // namespace
}  // namespace cnn
