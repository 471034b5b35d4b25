// Synchronised batch norm (--bn.sync): N ranks compute what one process computes with the whole global batch
// (weights and running statistics within 1e-5 after several steps, on the CPU backend through MPI and on the
// emulated CUDA backend through the emulated NCCL), which plain batch norm does not; and its gradients over
// all ranks match central finite differences of the global loss. The trained net's batch norms end with a fused
// ReLU and a fused capped ReLU.
#include <cstring>
#include <functional>

#include "io/sampler.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

constexpr int kH = 6, kW = 5, kClasses = 3;
constexpr int64_t kGlobal = 12;  // divisible by 1, 2, 3 and 4 ranks

struct Trained {
  std::vector<float> params, buffers;
};

// `steps` steps of a small BN net as rank `rank` of `world` (comm null: one process with the whole batch).
Trained train(Backend& be, Collectives* comm, int rank, int world, bool sync, int steps) {
  const int local = static_cast<int>(kGlobal / world);
  BnOptions bn;
  bn.sync = sync;
  Net net(be, Dims{kH, kW, 2}, kClasses);
  net.add(make_conv2d("conv1", 4, {3, 1, 1, false}));
  // With their activations fused (sync: run after the synchronised op), ReLU and a capped ReLU (ReLU6's kind,
  // capped at 0.5 so that the normalised values reach the cap).
  net.add(make_batchnorm("bn1", bn, true));
  net.add(make_conv2d("conv2", 5, {3, 2, 1, false}));
  net.add(make_batchnorm("bn2", bn, BnAct::relu_capped(0.5f)));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", kClasses));
  net.build(local, 21);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  auto opt = make_optimizer(oc, be, net);
  GradSyncOptions go;
  go.bucket_bytes = 64 * sizeof(float);
  std::unique_ptr<GradSync> gsync;
  if (comm) gsync = comm->make_grad_sync(net.grads(), net.num_params(), go);
  StepBuffers buf = alloc_step_buffers(be, net);
  Sampler sampler(60, kGlobal, 4);
  for (int s = 0; s < steps; ++s) {
    const auto ids = sampler.rank_slice(s / sampler.steps_per_epoch(), s % sampler.steps_per_epoch(), rank, world);
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int64_t id : ids) {
      auto v = test::random_vec(kH * kW * 2, 900 + id);
      for (size_t i = 0; i < v.size(); ++i) v[i] = v[i] * 0.5f + (i % 2 ? 1.5f : -0.5f);  // channel means != 0
      x.insert(x.end(), v.begin(), v.end());
      y.push_back(static_cast<int32_t>((v[1] > 1.5f) + (v[8] > 0.f)));
    }
    be.upload(buf.x, x.data(), x.size() * sizeof(float));
    be.upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    StepStats st;
    train_step(be, net, *opt, gsync.get(), buf, local, kGlobal, 0.f, 0.1, st);
  }
  Trained t;
  t.params.resize(net.num_params());
  t.buffers.resize(net.num_buffers());
  be.download(t.params.data(), net.params(), sizeof(float) * t.params.size());
  be.download(t.buffers.data(), net.buffers(), sizeof(float) * t.buffers.size());
  free_step_buffers(be, buf);
  return t;
}

bool same_on_all_ranks(const std::vector<float>& v) {
  std::vector<float> root = v;
  broadcast(root.data(), root.size() * sizeof(float), 0);
  return std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0;
}

constexpr int kSteps = 6;  // crosses the epoch boundary (5 steps per epoch)

TEST(SyncBatchNorm, CpuRanksComputeWhatOneProcessComputes) {
  auto be = make_cpu_backend(1);
  auto mpi = make_mpi_collectives();
  const Trained n = train(*be, mpi.get(), world_rank(), world_size(), true, kSteps);
  const Trained one = train(*be, nullptr, 0, 1, true, kSteps);
  EXPECT_TRUE(same_on_all_ranks(n.params)) << "rank " << world_rank() << " diverged";
  EXPECT_TRUE(same_on_all_ranks(n.buffers)) << "running statistics differ between ranks";
  EXPECT_TRUE(test::all_close(n.params, one.params, 1e-6, 1e-5, "sync BN weights, N ranks vs 1 process"));
  EXPECT_TRUE(test::all_close(n.buffers, one.buffers, 1e-6, 1e-5, "sync BN running stats, N ranks vs 1 process"));
  // Plain batch norm normalises each rank's share alone: the same comparison must fail, or it proves nothing.
  const Trained plain = train(*be, mpi.get(), world_rank(), world_size(), false, kSteps);
  const Trained plain_one = train(*be, nullptr, 0, 1, false, kSteps);
  EXPECT_FALSE(test::all_close(plain.params, plain_one.params, 1e-6, 1e-5, "plain BN").operator bool());
  // In one process both see the whole batch: the synchronised ops with their separate activation passes give
  // what the fused kernels give.
  EXPECT_TRUE(test::all_close(one.params, plain_one.params, 1e-6, 1e-5, "sync vs plain BN weights, 1 process"));
  EXPECT_TRUE(test::all_close(one.buffers, plain_one.buffers, 1e-6, 1e-5, "sync vs plain BN stats, 1 process"));
}

TEST(SyncBatchNorm, EmuNcclRanksComputeWhatOneProcessComputes) {
  auto emu = make_emu_backend();
  Trained n;
  {
    auto nccl = make_emu_collectives(*emu);
    n = train(*emu, nccl.get(), world_rank(), world_size(), true, kSteps);
  }
  const Trained one = train(*emu, nullptr, 0, 1, true, kSteps);
  EXPECT_TRUE(same_on_all_ranks(n.params)) << "rank " << world_rank() << " diverged";
  EXPECT_TRUE(test::all_close(n.params, one.params, 1e-6, 1e-5, "emu sync BN weights, N ranks vs 1 process"));
  EXPECT_TRUE(test::all_close(n.buffers, one.buffers, 1e-6, 1e-5, "emu sync BN running stats, N ranks vs 1"));
  auto cpu = make_cpu_backend(1);
  const Trained cpu_one = train(*cpu, nullptr, 0, 1, true, kSteps);
  EXPECT_TRUE(test::all_close(n.params, cpu_one.params, 1e-6, 1e-5, "emu N ranks vs cpu 1 process"));
}

// Central differences of the global loss L = sum over ranks of sum(y * r_rank), y = syncBN(x), with respect
// to elements of x on every rank and to gamma and beta (the same on all ranks).
TEST(SyncBatchNorm, GradientsMatchFiniteDifferencesOfTheGlobalLoss) {
  auto be = make_cpu_backend(1);
  auto mpi = make_mpi_collectives();
  const int rank = world_rank(), world = world_size();
  const Dims in{3, 4, 5};
  const int n = 3;
  const int c = in.c;
  BnOptions o;
  o.sync = true;
  auto layer = make_batchnorm("bn", o);
  layer->setup(in);
  std::vector<float> gamma = test::random_vec(c, 41, 0.5f, 1.5f), beta = test::random_vec(c, 42);
  std::vector<float> dgamma(c, 0.f), dbeta(c, 0.f), rmean(c, 0.f), rvar(c, 1.f);
  layer->bind({gamma.data(), beta.data()}, {dgamma.data(), dbeta.data()});
  layer->bind_buffers({rmean.data(), rvar.data()});
  layer->allocate(*be, n);
  BatchContext ctx;
  ctx.comm = mpi.get();
  layer->set_batch(ctx);
  std::vector<float> x = test::random_vec(in.size() * n, 300 + rank), y(x.size()), dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] += (i % c) * 0.3f;  // channel means differ
  const std::vector<float> r = test::random_vec(y.size(), 500 + rank);
  auto global_loss = [&] {
    layer->forward(*be, x.data(), y.data(), n, true);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    allreduce_sum(&l, 1);
    return l;
  };
  global_loss();
  layer->backward(*be, x.data(), y.data(), r.data(), dx.data(), n);
  allreduce_sum(dgamma.data(), c);  // each rank holds its share; the gradient allreduce adds them up
  allreduce_sum(dbeta.data(), c);
  const float eps = 1e-2f;
  auto central = [&](float& v) {
    const float keep = v;
    v = keep + eps;
    const double up = global_loss();
    v = keep - eps;
    const double down = global_loss();
    v = keep;
    return (up - down) / (2.0 * eps);
  };
  // Input elements: every rank perturbs its own in turn while all evaluate the global loss.
  const std::vector<size_t> picks = {0, 7, 13, 29, x.size() - 1};
  std::vector<double> numeric_dx;
  std::vector<float> analytic_dx;
  for (int q = 0; q < world; ++q)
    for (size_t k : picks) {
      float dummy = 0.f;
      const double d = central(q == rank ? x[k] : dummy);
      if (q == rank) {
        numeric_dx.push_back(d);
        analytic_dx.push_back(dx[k]);
      }
    }
  EXPECT_TRUE(test::all_close(analytic_dx, numeric_dx, 5e-3, 1e-2, "sync BN dx vs finite differences"));
  std::vector<double> numeric_g, numeric_b;
  for (int j = 0; j < c; ++j) {
    numeric_g.push_back(central(gamma[j]));
    numeric_b.push_back(central(beta[j]));
  }
  EXPECT_TRUE(test::all_close(dgamma, numeric_g, 5e-3, 1e-2, "sync BN dgamma vs finite differences"));
  EXPECT_TRUE(test::all_close(dbeta, numeric_b, 5e-3, 1e-2, "sync BN dbeta vs finite differences"));
}

}  // namespace
}  // namespace cnn
