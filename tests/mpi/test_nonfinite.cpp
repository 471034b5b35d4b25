// Non-finite detection across ranks through the real step: a NaN in one layer's gradient on one rank is seen
// by every rank at the same step, gates the update so the weights stay what they were and identical on every
// rank, and the message names that rank and layer. Also the per-rank gathers of the step breakdown.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/model/zoo.h"
#include "src/obs/rank_report.h"
#include "src/train/nonfinite.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace cnn {
namespace {

std::unique_ptr<Net> small_net(Backend& be, int max_n) {
  auto net = std::make_unique<Net>(be, Dims{8, 8, 1}, 3);
  net->add(make_conv2d("conv1", 4, {3, 1, 1, true}));
  net->add(make_relu("relu1"));
  net->add(make_conv2d("conv2", 5, {3, 2, 1, true}));
  net->add(make_relu("relu2"));
  net->add(make_flatten("flat"));
  net->add(make_linear("fc", 3));
  net->build(max_n, 3);
  return net;
}

struct Rig {
  std::unique_ptr<Backend> be;
  std::unique_ptr<Net> net;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<Collectives> comm;  // MPI on the CPU backend, the emulated NCCL on the emulated CUDA backend
  std::unique_ptr<GradSync> sync;
  std::unique_ptr<NonFiniteGuard> guard;
  StepBuffers buf;
  int n = 4;  // per rank
  explicit Rig(bool emu = false) : be(emu ? make_emu_backend() : make_cpu_backend(1)) {
    net = small_net(*be, n);
    OptimizerConfig oc;
    opt = make_optimizer(oc, *be, *net);
    comm = emu ? make_emu_collectives(*be) : make_mpi_collectives();
    GradSyncOptions go;
    go.bucket_bytes = 64 * sizeof(float);
    sync = comm->make_grad_sync(net->grads(), net->num_params(), go);
    guard = std::make_unique<NonFiniteGuard>(*be, net->grads(), net->num_params(), true);
    be->set_update_gate(guard->d_flag());
    buf = alloc_step_buffers(*be, *net);
  }
  ~Rig() {
    be->set_update_gate(nullptr);
    free_step_buffers(*be, buf);
    sync.reset();
    comm.reset();
  }
  // One step on this rank's samples of global step `step`.
  void step(int64_t step) {
    std::vector<float> x = test::random_vec(static_cast<size_t>(n) * 64, 100 * step + world_rank());
    std::vector<int32_t> y(n);
    for (int i = 0; i < n; ++i) y[i] = (i + world_rank()) % 3;
    be->upload(buf.x, x.data(), sizeof(float) * x.size());
    be->upload(buf.labels, y.data(), sizeof(int32_t) * n);
    StepConfig sc;
    sc.global_batch = static_cast<int64_t>(n) * world_size();
    sc.step = step;
    sc.nonfinite = guard.get();
    StepStats st;
    train_step(*be, *net, *opt, sync.get(), buf, n, sc, 0.05, st);
    double loss = 0;
    int64_t correct = 0;
    take_loss_totals(*be, buf, &loss, &correct);
    guard->end_step(step, std::isfinite(loss));
  }
  std::vector<float> params() const {
    std::vector<float> p(net->num_params());
    be->download(p.data(), net->params(), sizeof(float) * p.size());
    return p;
  }
};

// On the CPU backend and on the emulated CUDA backend (device record, gated kernels, pinned host mirror).
class NonFiniteOn : public ::testing::TestWithParam<bool> {};

TEST_P(NonFiniteOn, OneRanksLayerGradientIsFoundNamedAndSkippedEverywhere) {
  const int bad_rank = world_size() - 1;
  ::setenv("CNNTRAIN_TEST_NAN", strprintf("%d:conv2.weight:2", bad_rank).c_str(), 1);
  Rig r(GetParam());
  r.guard->arm_test_injection(*r.net, world_rank());
  ::unsetenv("CNNTRAIN_TEST_NAN");
  std::vector<NonFiniteRecord> seen;
  std::vector<float> before_bad;
  for (int64_t s = 0; s < 4; ++s) {
    if (s == 2) before_bad = r.params();
    r.step(s);
    if (s == 2) {
      EXPECT_EQ(r.params(), before_bad) << "the update of the bad step was applied";
      test::expect_same_on_every_rank(r.params(), "after the skipped step");
    }
    // The verdict of step s arrives after step s + 1 (poll), the same on every rank.
    for (const auto& rec : r.guard->poll()) seen.push_back(rec);
  }
  for (const auto& rec : r.guard->drain()) seen.push_back(rec);
  ASSERT_EQ(seen.size(), 4u);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(seen[s].step, s);
    EXPECT_EQ(seen[s].bad(), s == 2) << "step " << s;
  }
  EXPECT_EQ(seen[2].local_count, world_rank() == bad_rank ? 1 : 0);
  EXPECT_GT(seen[2].agreed_count, 0);
  EXPECT_NE(r.params(), before_bad) << "later steps train again";
  test::expect_same_on_every_rank(r.params(), "at the end");
  const std::string msg = describe_nonfinite(seen[2], *r.net, gather_host_names());
  EXPECT_EQ(msg.rfind(strprintf("non-finite gradient at step 3, started on rank %d in conv2.weight of layer conv2",
                                bad_rank), 0), 0u) << msg;
  EXPECT_NE(msg.find(strprintf("rank %d on %s (1 values", bad_rank, gather_host_names()[bad_rank].c_str())),
            std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Backends, NonFiniteOn, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "emu" : "cpu"; });

TEST(NonFinite, ANonFiniteLossIsNamedWithTheLastLayerFirstInBackwardOrder) {
  Rig r;
  if (world_rank() == 0) {
    // An infinite logit on rank 0 only: its loss and every gradient behind it are non-finite.
    for (const ParamInfo& p : r.net->param_table())
      if (p.name == "fc.bias") r.be->fill(r.net->params() + p.offset, 1, INFINITY);
  }
  r.step(0);
  const auto recs = r.guard->drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(recs[0].bad());
  EXPECT_EQ(recs[0].local_loss_finite, world_rank() != 0);
  const std::string msg = describe_nonfinite(recs[0], *r.net, gather_host_names());
  EXPECT_EQ(msg.rfind("non-finite gradient at step 1, started on rank 0 in fc.", 0), 0u) << msg;
  EXPECT_NE(msg.find("loss non-finite"), std::string::npos) << msg;
}

TEST(RankReport, GathersEveryRanksSampleInRankOrder) {
  RankSample mine;
  for (int p = 0; p < kNumPhases; ++p) mine.phase[p] = world_rank() * 10 + p;
  mine.steps = 3;
  mine.mem_peak = 1000 + world_rank();
  const auto all = gather_rank_samples(mine);
  ASSERT_EQ(static_cast<int>(all.size()), world_size());
  for (int q = 0; q < world_size(); ++q) {
    EXPECT_EQ(all[q].phase[3], q * 10 + 3);
    EXPECT_EQ(all[q].mem_peak, 1000 + q);
    EXPECT_EQ(all[q].steps, 3);
  }
  const auto hosts = gather_host_names();
  ASSERT_EQ(static_cast<int>(hosts.size()), world_size());
  EXPECT_EQ(hosts[world_rank()], host_name());
}

}  // namespace
}  // namespace cnn
