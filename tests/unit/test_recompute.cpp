// Activation recomputation (Net::set_recompute, --train.recompute; docs/perf.md): residual blocks that keep
// only their input and output and rerun the rest in backward give bit-identical losses, gradients, weights and
// batch-norm running statistics, step after step, on the CPU backend and the emulated CUDA backend (and a GPU,
// with deterministic reductions, where there is one), in fp32 and bf16, for basic blocks (ResNet-20: identity and zero-padding shortcuts) and
// bottleneck blocks (projection shortcuts), with plain, ghost and synchronised batch norm; synchronised batch
// norm sums across ranks no more often than without; block prefixes select blocks and bad names are refused;
// ResNet-50's activation memory per sample at 224x224 drops by more than 2x.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/collectives.h"
#include "kernels/cpu/dnnl_ops.h"
#include "src/base/error.h"
#include "src/model/blocks.h"
#include "src/model/zoo.h"
#include "src/train/optimizer.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

constexpr int kBatch = 4, kSteps = 3, kClasses = 10, kSide = 8;

// One rank's collectives that count the sums (each the identity: one rank), for synchronised batch norm.
class CountingRank final : public Collectives {
 public:
  std::string describe() const override { return "test: one counting rank"; }
  int ranks() const override { return 1; }
  void allreduce_sum(float*, size_t, const std::string&) override { ++sums; }
  void allreduce_sum(double*, size_t, const std::string&) override { ++sums; }
  void allreduce_sum_host(double*, size_t, const std::string&) override { ++sums; }
  std::unique_ptr<GradSync> make_grad_sync(float*, size_t, const GradSyncOptions&) override { return nullptr; }
  int sums = 0;
};

enum class Model { kResnet20, kBottleneck };

void add_model(Net& net, Model m, const BnOptions& bn) {
  if (m == Model::kResnet20) {
    build_resnet_cifar(net, 20, ModelOptions{bn});
    return;
  }
  add_conv_bn_relu(net, 1, 8, {3, 1, 1, false}, bn);
  net.add(make_bottleneck_block("layer1.0", 4, 1, bn));  // projection: 8 -> 16 channels
  net.add(make_bottleneck_block("layer1.1", 4, 1, bn));  // identity
  net.add(make_bottleneck_block("layer2.0", 8, 2, bn));  // projection with stride 2
  add_pool_fc_head(net);
}

// What a run leaves after each step.
struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads, params, buffers;
  int sums = 0;  // synchronised batch norm's cross-rank sums
  size_t act_bytes = 0;
  int recomputing = 0;
};

std::vector<float> download(Backend& be, const float* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

// kSteps SGD steps (forward, loss, backward, update, as train_step runs them) on random images.
Trace train(Backend& be, Model m, DType dt, const BnOptions& bn, const std::string& recompute) {
  Net net(be, Dims{kSide, kSide, 3}, kClasses);
  net.set_dtype(dt);
  add_model(net, m, bn);
  net.set_recompute(recompute);
  net.build(kBatch, 11);
  OptimizerConfig oc;
  oc.momentum = 0.9;
  auto opt = make_optimizer(oc, be, net);
  CountingRank comm;
  const size_t px = static_cast<size_t>(kSide) * kSide * 3;
  float* d_x = static_cast<float*>(be.alloc(sizeof(float) * px * kBatch));
  int32_t* d_y = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * kBatch));
  void* d_dl = be.alloc(dtype_size(dt) * kClasses * kBatch);
  Trace t;
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<float> x = random_vec(px * kBatch, 70 + s);
    std::vector<int32_t> y(kBatch);
    for (int i = 0; i < kBatch; ++i) y[i] = (3 * i + s) % kClasses;
    be.upload(d_x, x.data(), sizeof(float) * x.size());
    be.upload(d_y, y.data(), sizeof(int32_t) * y.size());
    net.zero_grads();
    net.set_batch({5, s, nullptr, bn.sync ? &comm : nullptr});
    double loss = 0;
    int64_t correct = 0;
    be.softmax_xent(dt, kBatch, kClasses, net.forward(d_x, kBatch, true), d_y, 0.f, 1.f / kBatch, d_dl, &loss,
                    &correct);
    net.backward(d_dl, kBatch);
    opt->step(0.05);
    net.sync_weight_copy();
    t.losses.push_back(loss);
    t.grads.push_back(download(be, net.grads(), net.num_params()));
    const Net& cnet = net;
    t.params.push_back(download(be, cnet.params(), net.num_params()));
    t.buffers.push_back(download(be, net.buffers(), net.num_buffers()));
  }
  t.sums = comm.sums;
  t.act_bytes = net.activation_bytes_per_sample();
  t.recomputing = net.recomputing_blocks();
  be.release(d_x);
  be.release(d_y);
  be.release(d_dl);
  return t;
}

::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << what << " [" << i << "]: " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

void expect_identical(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_EQ(std::memcmp(&a.losses[s], &b.losses[s], sizeof(double)), 0) << a.losses[s] << " vs " << b.losses[s];
    EXPECT_TRUE(same_bits(a.grads[s], b.grads[s], "gradient"));
    EXPECT_TRUE(same_bits(a.params[s], b.params[s], "weights"));
    EXPECT_TRUE(same_bits(a.buffers[s], b.buffers[s], "batch-norm running statistics"));
  }
}

class Recompute : public ::testing::TestWithParam<BackendTarget> {};

TEST_P(Recompute, BitIdenticalLossesGradientsAndRunningStatistics) {
  const bool gpu = GetParam().kind == TargetKind::kGpu || GetParam().kind == TargetKind::kGpuVendor;
  std::unique_ptr<TargetBackend> dev;
  std::unique_ptr<Backend> gpu_be;
  std::string skip;
  if (gpu) {
    // Deterministic reductions: without them the rerun's batch statistics, sums meeting in atomics, may differ
    // from the forward's in the last bit, as two runs of one job do (docs/perf.md).
    gpu_be = make_gpu_test_backend(GetParam().kind == TargetKind::kGpuVendor, &skip, true);
    if (!gpu_be && gpu_required()) ADD_FAILURE() << "CNNTRAIN_REQUIRE_GPU=1: " << skip;
  } else {
    dev = std::make_unique<TargetBackend>(GetParam());
    skip = dev->skip_reason();
  }
  if (!skip.empty()) GTEST_SKIP() << skip;
  Backend& be = gpu ? *gpu_be : *dev->get();
  std::vector<DType> types = {DType::kF32};
  if (GetParam().kind != TargetKind::kCpu || dnnl_bf16_unsupported().empty()) types.push_back(DType::kBF16);
  BnOptions ghost, sync;
  ghost.group = 2;
  sync.sync = true;
  struct Case {
    const char* name;
    BnOptions bn;
  };
  for (Model m : {Model::kResnet20, Model::kBottleneck})
    for (DType dt : types)
      // Synchronised batch norm runs on fp32 activations only.
      for (const Case& c : {Case{"batch norm", {}}, Case{"ghost batch norm", ghost}, Case{"sync batch norm", sync}}) {
        if (c.bn.sync && dt != DType::kF32) continue;
        SCOPED_TRACE(std::string(m == Model::kResnet20 ? "resnet20, " : "bottleneck net, ") + dtype_name(dt) +
                     ", " + c.name);
        const Trace plain = train(be, m, dt, c.bn, "false");
        const Trace again = train(be, m, dt, c.bn, "true");
        EXPECT_EQ(again.recomputing, m == Model::kResnet20 ? 9 : 3);
        EXPECT_LT(again.act_bytes, plain.act_bytes);
        expect_identical(plain, again);
        // The rerun forward reuses the forward's global statistics: no more sums across ranks than without.
        EXPECT_EQ(again.sums, plain.sums);
        if (c.bn.sync) {
          EXPECT_GT(plain.sums, 0);
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Targets, Recompute,
                         ::testing::Values(BackendTarget{"cpu", TargetKind::kCpu, 1, 0},
                                           BackendTarget{"emu", TargetKind::kEmu, 1, 0},
                                           BackendTarget{"cuda", TargetKind::kGpu},
                                           BackendTarget{"cuda_vendor", TargetKind::kGpuVendor}),
                         target_param_name);

// Prefixes select whole stages or single blocks; the rest keeps its activations.
TEST(RecomputeBlocks, PrefixesSelectBlocksAndBadNamesAreRefused) {
  auto be = make_cpu_backend(1);
  const Trace none = train(*be, Model::kResnet20, DType::kF32, {}, "false");
  const Trace stage = train(*be, Model::kResnet20, DType::kF32, {}, "layer3");
  const Trace two = train(*be, Model::kResnet20, DType::kF32, {}, "layer1.2,layer2");
  EXPECT_EQ(none.recomputing, 0);
  EXPECT_EQ(stage.recomputing, 3);
  EXPECT_EQ(two.recomputing, 4);
  EXPECT_LT(stage.act_bytes, none.act_bytes);
  expect_identical(none, stage);
  expect_identical(none, two);
  for (const char* bad : {"layer9", "layer1.3", "conv1", "layer", ""}) {
    Net net(*be, Dims{kSide, kSide, 3}, kClasses);
    add_model(net, Model::kResnet20, {});
    net.set_recompute(std::string(bad) + ",layer2");
    try {
      net.build(kBatch, 1);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitUsage);
      EXPECT_NE(std::string(e.what()).find("--train.recompute"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(bad) == "conv1" ? "conv1 is not a residual block"
                                                                       : "'" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// ResNet-50 at 224x224: what the batch size multiplies falls by more than half (docs/perf.md has the figures).
TEST(RecomputeMemory, ResNet50ActivationBytesPerSampleDropMoreThanTwofold) {
  auto be = make_cpu_backend(1);
  size_t bytes[2];
  for (int r = 0; r < 2; ++r) {
    Net net(*be, Dims{224, 224, 3}, 1000);
    build_model("resnet50", net);
    net.set_recompute(r ? "true" : "false");
    net.build(1, 1);
    bytes[r] = net.activation_bytes_per_sample();
    EXPECT_EQ(net.recomputing_blocks(), r ? 16 : 0);
  }
  RecordProperty("fp32_bytes_per_sample", std::to_string(bytes[0]) + " -> " + std::to_string(bytes[1]));
  EXPECT_GT(bytes[0], 2 * bytes[1]) << bytes[0] << " -> " << bytes[1] << " bytes per sample";
}

}  // namespace
}  // namespace cnn::test
