// Data parallelism with the recipe features: dropout masks keyed by global sample id, gradient accumulation
// and clipping give the same weights on any rank count; batch-norm nets stay identical across ranks.
#include <cstring>

#include "io/sampler.h"
#include "src/comm/comm.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

const int kH = 10, kW = 10, kClasses = 3;

std::unique_ptr<Net> make_net(Backend& be, int max_n, bool bn) {
  auto net = std::make_unique<Net>(be, Dims{kH, kW, 1}, kClasses);
  net->add(make_conv2d("conv1", 4, {3, 1, 1, !bn}));
  if (bn) net->add(make_batchnorm("bn1"));
  net->add(make_relu("relu1"));
  net->add(make_avgpool("pool1", 2, 2));
  net->add(make_dropout("drop1", 0.4f));
  net->add(make_flatten("flat"));
  net->add(make_linear("fc", kClasses));
  net->build(max_n, 17);
  return net;
}

// `steps` steps of global batch 24 as rank `rank` of `world`, in `accum` micro-batches per rank.
std::vector<float> train(int rank, int world, int accum, bool bn, int steps, std::vector<float>* buffers = nullptr) {
  const int64_t global = 24;
  const int local = static_cast<int>(global / world);
  auto be = make_cpu_backend(1);
  auto net = make_net(*be, local / accum, bn);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.nesterov = true;
  oc.weight_decay = 1e-3;
  auto opt = make_optimizer(oc, *be, *net);
  auto comm = make_mpi_collectives();
  GradSyncOptions go;
  go.bucket_bytes = 64 * sizeof(float);
  std::unique_ptr<GradSync> sync;
  if (world > 1) sync = comm->make_grad_sync(net->grads(), net->num_params(), go);
  StepBuffers buf = alloc_step_buffers(*be, *net, local);
  Sampler sampler(100, global, 3);
  StepConfig sc;
  sc.global_batch = global;
  sc.accum_steps = accum;
  sc.clip_norm = 0.5;
  sc.seed = 99;
  sc.ids = buf.ids;
  StepStats st;
  for (int s = 0; s < steps; ++s) {
    auto ids = sampler.rank_slice(s / sampler.steps_per_epoch(), s % sampler.steps_per_epoch(), rank, world);
    std::vector<float> x;
    std::vector<int32_t> y;
    for (int64_t id : ids) {
      auto v = test::random_vec(kH * kW, 500 + id);
      x.insert(x.end(), v.begin(), v.end());
      y.push_back(static_cast<int32_t>((v[3] > 0) + (v[40] > 0.5f)));
    }
    be->upload(buf.x, x.data(), x.size() * sizeof(float));
    be->upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    be->upload(buf.ids, ids.data(), ids.size() * sizeof(int64_t));
    sc.step = s;
    train_step(*be, *net, *opt, sync.get(), buf, local, sc, 0.1, st);
  }
  free_step_buffers(*be, buf);
  if (buffers) buffers->assign(net->buffers(), net->buffers() + net->num_buffers());
  return std::vector<float>(net->params(), net->params() + net->num_params());
}

bool same_on_all_ranks(const std::vector<float>& v) {
  std::vector<float> root = v;
  broadcast(root.data(), root.size() * sizeof(float), 0);
  return std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0;
}

TEST(RecipeParallel, DropoutAccumulationClippingMatchOneProcess) {
  const int steps = 6;  // crosses the epoch boundary (4 steps per epoch)
  const auto mine = train(world_rank(), world_size(), 2, false, steps);
  EXPECT_TRUE(same_on_all_ranks(mine)) << "rank " << world_rank() << " diverged";
  EXPECT_TRUE(test::all_close(mine, train(0, 1, 1, false, steps), 1e-6, 1e-5, "vs 1 process, no accumulation"));
}

TEST(RecipeParallel, BatchNormNetsStayIdenticalAcrossRanks) {
  std::vector<float> buffers;
  const auto mine = train(world_rank(), world_size(), 1, true, 5, &buffers);
  EXPECT_TRUE(same_on_all_ranks(mine)) << "rank " << world_rank() << " diverged";
  // Running statistics are local (each rank normalises with its own batch statistics) until averaged.
  ASSERT_FALSE(buffers.empty());
}

}  // namespace
}  // namespace cnn
