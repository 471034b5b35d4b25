// Training through the Net/step API: 20 steps of a small CNN with the emulated CUDA backend (and on a real
// GPU where there is one) give the same per-step losses (within 1e-4 relative) and nearly the same weights as
// the reference CPU kernels.
#include <functional>

#include "kernels/simt/simt.h"
#include "src/model/blocks.h"
#include "src/train/step.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

constexpr int kH = 12, kW = 11, kC = 2, kClasses = 5, kBatch = 10, kSteps = 20;

// The network under test, one layer factory per entry: conv, batch norm (plain and fused with its ReLU),
// pooling (max and average), a residual block with a projection shortcut (its join fused into batch norm) and
// linear layers.
std::vector<std::function<std::unique_ptr<Layer>()>> small_cnn() {
  return {
      [] { return make_conv2d("conv1", 8, {3, 1, 1, true}); },
      [] { return make_relu("relu1"); },
      [] { return make_maxpool("pool1", 2, 2); },
      [] { return make_batchnorm("bn1"); },
      [] { return make_basic_block("res1", 10, 1, Shortcut::kProjection); },
      [] { return make_conv2d("conv2", 12, {3, 2, 1, false}); },
      [] { return make_batchnorm("bn2", {}, true); },
      [] { return make_maxpool("pool2", 3, 1, 1); },
      [] { return make_avgpool("apool", 2, 1); },
      [] { return make_flatten("flat"); },
      [] { return make_linear("fc1", 24); },
      [] { return make_relu("relu3"); },
      [] { return make_linear("fc2", kClasses); },
  };
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<float> weights;
};

// Synthetic batches: random images, labels from a few pixels so the net has something to learn.
TrainRun train(Backend& be, bool nesterov) {
  Net net(be, Dims{kH, kW, kC}, kClasses);
  for (auto& make : small_cnn()) net.add(make());
  net.build(kBatch, 7);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  oc.weight_decay = 1e-3;
  oc.nesterov = nesterov;
  auto opt = make_optimizer(oc, be, net);
  StepBuffers buf = alloc_step_buffers(be, net);
  TrainRun run;
  for (int s = 0; s < kSteps; ++s) {
    auto x = random_vec(static_cast<size_t>(kBatch) * kH * kW * kC, 1000 + s);
    std::vector<int32_t> y(kBatch);
    for (int i = 0; i < kBatch; ++i)
      y[i] = (x[i * kH * kW * kC] > 0) + 2 * (x[i * kH * kW * kC + 7] > 0) + (x[i * kH * kW * kC + 30] > 0.5f);
    be.upload(buf.x, x.data(), x.size() * sizeof(float));
    be.upload(buf.labels, y.data(), y.size() * sizeof(int32_t));
    StepStats st;
    train_step(be, net, *opt, nullptr, buf, kBatch, kBatch, 0.1f, 0.05, st);
    double loss = 0;
    int64_t correct = 0;
    take_loss_totals(be, buf, &loss, &correct);
    run.losses.push_back(loss / kBatch);
  }
  be.synchronize();
  run.weights.resize(net.num_params());
  be.download(run.weights.data(), net.params(), sizeof(float) * net.num_params());
  free_step_buffers(be, buf);
  return run;
}

class Training : public ::testing::TestWithParam<BackendTarget> {};

void expect_matches_reference(Backend& dev) {
  auto ref = make_reference_backend();
  for (bool nesterov : {false, true}) {
    TrainRun cpu = train(*ref, nesterov), emu = train(dev, nesterov);
    EXPECT_TRUE(all_close(emu.losses, cpu.losses, 0, 1e-4, nesterov ? "nesterov losses" : "losses"));
    EXPECT_TRUE(all_close(emu.weights, cpu.weights, 1e-4, 1e-3, "weights after 20 steps"));
    EXPECT_LT(cpu.losses.back(), cpu.losses.front()) << "the loss did not decrease: the test learns nothing";
  }
}

TEST_P(Training, TwentyStepsMatchReference) {
  TargetBackend dev(GetParam());
  if (!dev.skip_reason().empty()) GTEST_SKIP() << dev.skip_reason();
  expect_matches_reference(*dev.get());
}

// Training steps are slow under the emulator: the default schedule and one seeded reordering, and the GPU.
INSTANTIATE_TEST_SUITE_P(Targets, Training,
                         ::testing::Values(BackendTarget{"emu_default", TargetKind::kEmu, 1, 0},
                                           BackendTarget{"emu_seed404", TargetKind::kEmu, 1, 404},
                                           BackendTarget{"cuda", TargetKind::kGpu},
                                           BackendTarget{"cuda_vendor", TargetKind::kGpuVendor}),
                         target_param_name);

// The emulated backend with deferred streams: uploads through the staging ring, the copy stream, the loss
// totals and the step's kernels run at synchronisation points in seeded orders.
TEST(TrainingDeferredStreams, TwentyStepsMatchReference) {
  simt::set_deferred_streams(31);
  {
    TargetBackend dev(BackendTarget{"emu_deferred31", TargetKind::kEmu, 1, 0});
    expect_matches_reference(*dev.get());
  }
  simt::set_deferred_streams(0);
}

}  // namespace
}  // namespace cnn::test
