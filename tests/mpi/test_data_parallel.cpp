// Data parallelism end to end through the real step: after K steps every rank holds identical weights and
// they equal (within 1e-5 relative) those of a single process training on the same global batches.
#include <cstring>

#include "io/loader.h"
#include "io/sampler.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/model/zoo.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace cnn {
namespace {

// Synthetic samples: 12x12x1 images whose pixels depend on the id and a label derived from them.
struct Synthetic {
  static const int H = 12, W = 12;
  void fill(const std::vector<int64_t>& ids, std::vector<float>& x, std::vector<int32_t>& y) const {
    x.resize(ids.size() * H * W);
    y.resize(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      auto v = test::random_vec(H * W, 1000 + ids[k]);
      std::copy(v.begin(), v.end(), x.begin() + k * H * W);
      y[k] = static_cast<int32_t>((v[0] > 0) + 2 * (v[5] > 0));
    }
  }
};

std::unique_ptr<Net> small_net(Backend& be, int max_n) {
  auto net = std::make_unique<Net>(be, Dims{Synthetic::H, Synthetic::W, 1}, 4);
  net->add(make_conv2d("conv1", 6, {3, 1, 1, true}));
  net->add(make_relu("relu1"));
  net->add(make_maxpool("pool1", 2, 2));
  net->add(make_conv2d("conv2", 8, {3, 2, 1, true}));
  net->add(make_relu("relu2"));
  net->add(make_flatten("flat"));
  net->add(make_linear("fc", 4));
  net->build(max_n, 11);
  return net;
}

// Trains `steps` steps as rank `rank` of `world` (world 1: no communication) and returns the weights.
std::vector<float> train(int rank, int world, bool communicate, int steps) {
  const int64_t global = 24;
  auto be = make_cpu_backend(1);
  auto net = small_net(*be, static_cast<int>(global / world));
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.weight_decay = 1e-3;
  auto opt = make_optimizer(oc, *be, *net);
  auto comm = make_mpi_collectives();
  GradSyncOptions go;
  go.bucket_bytes = 256 * sizeof(float);
  std::unique_ptr<GradSync> sync;
  if (communicate) sync = comm->make_grad_sync(net->grads(), net->num_params(), go);
  StepBuffers buf = alloc_step_buffers(*be, *net);
  Sampler sampler(200, global, 5);
  Synthetic data;
  std::vector<float> x;
  std::vector<int32_t> y;
  StepStats st;
  for (int s = 0; s < steps; ++s) {
    int64_t epoch = s / sampler.steps_per_epoch(), step = s % sampler.steps_per_epoch();
    data.fill(sampler.rank_slice(epoch, step, rank, world), x, y);
    be->upload(buf.x, x.data(), x.size() * sizeof(float));
    be->upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    train_step(*be, *net, *opt, sync.get(), buf, static_cast<int>(y.size()), global, 0.f, 0.05, st);
  }
  free_step_buffers(*be, buf);
  return std::vector<float>(net->params(), net->params() + net->num_params());
}

TEST(DataParallel, RanksAgreeAndMatchOneProcess) {
  const int steps = 12;  // crosses an epoch boundary (8 steps per epoch)
  std::vector<float> mine = train(world_rank(), world_size(), true, steps);
  test::expect_same_on_every_rank(mine, "weights");
  std::vector<float> single = train(0, 1, false, steps);
  EXPECT_TRUE(test::all_close(mine, single, 1e-6, 1e-5, "weights vs 1-rank run"));
  // And training moved the weights at all.
  auto be = make_cpu_backend(1);
  auto fresh = small_net(*be, 1);
  std::vector<float> init(fresh->params(), fresh->params() + fresh->num_params());
  EXPECT_FALSE(test::all_close(mine, init, 1e-4, 0, "weights vs initial").operator bool());
}

}  // namespace
}  // namespace cnn
