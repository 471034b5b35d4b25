// Data parallelism with the recipe features: dropout masks and stochastic depth (a residual join that drops whole
// samples of its branch) keyed by global sample id, gradient accumulation and clipping (which must engage) give the
// same weights on any rank count; batch-norm nets stay identical across ranks while each rank's running
// statistics are those of its own batches.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/sampler.h"
#include "src/comm/collectives.h"
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
  net->add(make_conv2d("branch", 4, {3, 1, 1, true}));
  net->add(make_stochastic_depth_add("join", 0.5f), {"pool1", "branch"});
  net->add(make_dropout("drop1", 0.4f));
  net->add(make_flatten("flat"));
  net->add(make_linear("fc", kClasses));
  net->build(max_n, 17);
  return net;
}

const int64_t kGlobal = 24;
const double kClip = 0.5;

// The samples of global batch `step` that rank `rank` of `world` takes.
void batch_of(Sampler& sampler, int step, int rank, int world, std::vector<int64_t>& ids, std::vector<float>& x,
              std::vector<int32_t>& y) {
  ids = sampler.rank_slice(step / sampler.steps_per_epoch(), step % sampler.steps_per_epoch(), rank, world);
  x.clear();
  y.clear();
  for (int64_t id : ids) {
    auto v = test::random_vec(kH * kW, 500 + id);
    x.insert(x.end(), v.begin(), v.end());
    y.push_back(static_cast<int32_t>((v[3] > 0) + (v[40] > 0.5f)));
  }
}

OptimizerConfig optimizer_config() {
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.nesterov = true;
  oc.weight_decay = 1e-3;
  return oc;
}

// `steps` steps of global batch 24 as rank `rank` of `world`, in `accum` micro-batches per rank. Returns the
// weights; `buffers` receives the batch-norm buffers, `norms` each step's gradient norm.
std::vector<float> train(int rank, int world, int accum, bool bn, int steps, std::vector<float>* buffers = nullptr,
                         std::vector<double>* norms = nullptr) {
  const int64_t global = kGlobal;
  const int local = static_cast<int>(global / world);
  auto be = make_cpu_backend(1);
  auto net = make_net(*be, local / accum, bn);
  auto opt = make_optimizer(optimizer_config(), *be, *net);
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
  sc.clip_norm = kClip;
  sc.seed = 99;
  sc.ids = buf.ids;
  StepStats st;
  std::vector<int64_t> ids;
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int s = 0; s < steps; ++s) {
    batch_of(sampler, s, rank, world, ids, x, y);
    be->upload(buf.x, x.data(), x.size() * sizeof(float));
    be->upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    be->upload(buf.ids, ids.data(), ids.size() * sizeof(int64_t));
    sc.step = s;
    train_step(*be, *net, *opt, sync.get(), buf, local, sc, 0.1, st);
    if (norms) norms->push_back(st.grad_norm);
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

TEST(RecipeParallel, DropoutStochasticDepthAccumulationClippingMatchOneProcess) {
  const int steps = 6;  // crosses the epoch boundary (4 steps per epoch)
  std::vector<double> norms;
  const auto mine = train(world_rank(), world_size(), 2, false, steps, nullptr, &norms);
  EXPECT_TRUE(same_on_all_ranks(mine)) << "rank " << world_rank() << " diverged";
  EXPECT_TRUE(test::all_close(mine, train(0, 1, 1, false, steps), 1e-6, 1e-5, "vs 1 process, no accumulation"));
  // Clipping really acted: in some steps the averaged gradient was longer than the limit.
  ASSERT_EQ(norms.size(), static_cast<size_t>(steps));
  EXPECT_GT(*std::max_element(norms.begin(), norms.end()), 1.5 * kClip) << "clipping never engaged";
}

// The ranks of a batch-norm net, simulated in one process: one net per rank with the same weights, each
// running its own slice (so its own batch statistics), the gradients summed as the allreduce does, then
// clipped and applied by each net's optimizer. Returns each simulated rank's batch-norm buffers.
std::vector<std::vector<float>> simulate_ranks(int world, int steps) {
  auto be = make_cpu_backend(1);
  const int local = static_cast<int>(kGlobal / world);
  std::vector<std::unique_ptr<Net>> nets;
  std::vector<std::unique_ptr<Optimizer>> opts;
  for (int r = 0; r < world; ++r) {
    nets.push_back(make_net(*be, local, true));
    opts.push_back(make_optimizer(optimizer_config(), *be, *nets.back()));
  }
  const size_t np = nets[0]->num_params();
  Sampler sampler(100, kGlobal, 3);
  std::vector<int64_t> ids;
  std::vector<float> x, dl(static_cast<size_t>(local) * kClasses), sum(np);
  std::vector<int32_t> y;
  for (int s = 0; s < steps; ++s) {
    std::fill(sum.begin(), sum.end(), 0.f);
    for (int r = 0; r < world; ++r) {
      Net& net = *nets[r];
      batch_of(sampler, s, r, world, ids, x, y);
      net.zero_grads();
      net.set_batch({99, s, ids.data()});
      double loss = 0;
      int64_t correct = 0;
      const float* z = static_cast<const float*>(net.forward(x.data(), local, true));  // an fp32 net
      be->softmax_xent(DType::kF32, local, kClasses, z, y.data(), 0.f, 1.f / kGlobal, dl.data(), &loss, &correct);
      net.backward(dl.data(), local);
      for (size_t i = 0; i < np; ++i) sum[i] += net.grads()[i];
    }
    const double norm = std::sqrt(be->sum_squares(np, sum.data()));
    if (norm > kClip) be->scale(np, static_cast<float>(kClip / norm), sum.data());
    for (int r = 0; r < world; ++r) {
      std::copy(sum.begin(), sum.end(), nets[r]->grads());
      opts[r]->step(0.1);
    }
  }
  std::vector<std::vector<float>> out;
  for (auto& n : nets) out.emplace_back(n->buffers(), n->buffers() + n->num_buffers());
  return out;
}

TEST(RecipeParallel, BatchNormRunningStatisticsAreEachRanksOwn) {
  const int steps = 5;
  std::vector<float> buffers;
  const auto mine = train(world_rank(), world_size(), 1, true, steps, &buffers);
  EXPECT_TRUE(same_on_all_ranks(mine)) << "rank " << world_rank() << " diverged";
  // Each rank's running statistics are those of its own batches: the simulated rank's, and not rank 0's.
  const auto sim = simulate_ranks(world_size(), steps);
  ASSERT_EQ(buffers.size(), sim[0].size());
  EXPECT_TRUE(test::all_close(buffers, sim[world_rank()], 1e-6, 1e-5, "running statistics vs the simulated rank"));
  if (world_rank() > 0) {
    EXPECT_FALSE(test::all_close(sim[world_rank()], sim[0], 1e-6, 1e-5, "").operator bool())
        << "rank " << world_rank() << "'s statistics equal rank 0's: the test would not tell ranks apart";
  }
}

}  // namespace
}  // namespace cnn
