// Data-parallel training with the emulated CUDA backend (--device emu): gradients averaged by the MPI
// GradSync on its buffers. Every rank ends with identical weights, and the global per-step losses match the
// CPU backend's on the same ranks within 1e-4 relative.
#include <cstring>

#include "io/sampler.h"
#include "kernels/cuda_backend.h"
#include "src/comm/comm.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

constexpr int kH = 10, kW = 10, kClasses = 4;
constexpr int64_t kGlobal = 16;

struct Result {
  std::vector<double> losses;  // global mean per step
  std::vector<float> weights;
};

Result train(Backend& be, int steps) {
  const int world = world_size(), rank = world_rank();
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
  GradSync sync(net.grads(), net.num_params(), 128 * sizeof(float));
  StepBuffers buf = alloc_step_buffers(be, net);
  Sampler sampler(100, kGlobal, 9);
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
    train_step(be, net, *opt, &sync, buf, static_cast<int>(ids.size()), kGlobal, 0.f, 0.05, st);
    double loss = st.loss_sum;
    allreduce_sum(&loss, 1);
    r.losses.push_back(loss / kGlobal);
  }
  r.weights.resize(net.num_params());
  be.download(r.weights.data(), net.params(), sizeof(float) * net.num_params());
  free_step_buffers(be, buf);
  return r;
}

TEST(EmuDataParallel, RanksAgreeAndLossesMatchCpu) {
  const int steps = 8;  // crosses an epoch boundary (6 steps per epoch)
  auto emu = make_emu_backend();
  auto cpu = make_cpu_backend(1);
  Result e = train(*emu, steps), c = train(*cpu, steps);
  std::vector<float> root = e.weights;
  broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), e.weights.data(), root.size() * sizeof(float)), 0)
      << "rank " << world_rank() << " diverged from rank 0";
  EXPECT_TRUE(test::all_close(e.losses, c.losses, 0, 1e-4, "emu vs cpu global losses"));
  EXPECT_TRUE(test::all_close(e.weights, c.weights, 1e-5, 1e-4, "emu vs cpu weights"));
}

}  // namespace
}  // namespace cnn
