// Residual blocks keep the tensors inside them, and a sequential net those between such blocks, in oneDNN's
// nChw16c where the fast CPU backend's convolutions work in it (Backend::blocked_conv_ok, the Winograd shapes;
// src/model/blocks.cpp, Net::pick_layouts), so that no layout conversion runs around those convolutions:
// training and evaluation give what the NHWC path gives
// (CNNTRAIN_BLOCKED_LAYOUT=0), up to the batch norm's summation order, for basic blocks (identity and
// zero-padding shortcuts) and bottleneck blocks, plain and ghost batch norm, recomputed or not; the model
// summary says which blocks do it; fp32 only, and no other backend is asked to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dnnl_ops.h"
#include "src/model/blocks.h"
#include "src/model/zoo.h"
#include "src/train/optimizer.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

constexpr int kBatch = 4, kSteps = 3, kClasses = 10, kSide = 8;

enum class Model { kResnet20, kBottleneck, kProjection };

void add_model(Net& net, Model m, const BnOptions& bn) {
  if (m == Model::kResnet20) return build_resnet_cifar(net, 20, ModelOptions{bn});
  add_conv_bn_relu(net, 1, 32, {3, 1, 1, false}, bn);
  if (m == Model::kProjection) {  // ResNet-18's blocks: a projection shortcut, then identity ones
    net.add(make_basic_block("layer1.0", 48, 1, Shortcut::kProjection, bn));
    net.add(make_basic_block("layer1.1", 48, 1, Shortcut::kProjection, bn));
    net.add(make_basic_block("layer2.0", 64, 2, Shortcut::kProjection, bn));
    return add_pool_fc_head(net);
  }
  net.add(make_bottleneck_block("layer1.0", 32, 1, bn));  // projection 32 -> 128; its 3x3 32 -> 32 blocked
  net.add(make_bottleneck_block("layer1.1", 32, 1, bn));  // identity
  add_pool_fc_head(net);
}

struct Trace {
  std::string summary;
  std::vector<double> losses;
  std::vector<float> params, buffers, eval_logits;
};

std::vector<float> download(Backend& be, const void* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

// kSteps SGD steps on random images, then an evaluation forward, on a fast CPU backend created with
// CNNTRAIN_BLOCKED_LAYOUT = `blocked` (read when the backend is made).
Trace train(bool blocked, Model m, DType dt, const BnOptions& bn, bool recompute) {
  setenv("CNNTRAIN_BLOCKED_LAYOUT", blocked ? "1" : "0", 1);
  auto be = make_cpu_backend(2, CpuKernels::kFast);
  unsetenv("CNNTRAIN_BLOCKED_LAYOUT");
  Trace r;
  {
    Net net(*be, Dims{kSide, kSide, 3}, kClasses);
    net.set_dtype(dt);
    add_model(net, m, bn);
    net.set_recompute(recompute ? "true" : "false");
    net.build(kBatch, 11);
    r.summary = net.summary();
    OptimizerConfig oc;
    oc.momentum = 0.9;
    auto opt = make_optimizer(oc, *be, net);
    const size_t px = static_cast<size_t>(kSide) * kSide * 3;
    float* d_x = static_cast<float*>(be->alloc(sizeof(float) * px * kBatch));
    int32_t* d_y = static_cast<int32_t*>(be->alloc(sizeof(int32_t) * kBatch));
    void* d_dl = be->alloc(dtype_size(dt) * kClasses * kBatch);
    for (int s = 0; s <= kSteps; ++s) {
      // Images on which no decision (a ReLU's sign, a ghost group's statistics of 8 values) sits within
      // rounding of its threshold: with seeds 40.. the ghost-group net's runs split into two families 1e-3
      // apart in the weights (the reference backend in one of them), which side depending on the last bits of
      // the convolutions (oneDNN's direct kernels against the Winograd ones of winograd16_conv.h).
      std::vector<float> x = random_vec(px * kBatch, 140 + s);
      for (float& v : x) v += 0.5f;  // a mean for the batch norms to remove
      std::vector<int32_t> y(kBatch);
      for (int i = 0; i < kBatch; ++i) y[i] = (3 * i + s) % kClasses;
      be->upload(d_x, x.data(), sizeof(float) * x.size());
      be->upload(d_y, y.data(), sizeof(int32_t) * y.size());
      net.set_batch({5, s, nullptr, nullptr});
      if (s == kSteps) {
        std::vector<float> logits(static_cast<size_t>(kBatch) * kClasses);
        be->convert(logits.size(), dt, net.forward(d_x, kBatch, false), DType::kF32, logits.data());
        r.eval_logits = logits;
        break;
      }
      net.zero_grads();
      double loss = 0;
      int64_t correct = 0;
      be->softmax_xent(dt, kBatch, kClasses, net.forward(d_x, kBatch, true), d_y, 0.f, 1.f / kBatch, d_dl, &loss,
                       &correct);
      net.backward(d_dl, kBatch);
      opt->step(0.05);
      net.sync_weight_copy();
      r.losses.push_back(loss);
    }
    const Net& cnet = net;
    r.params = download(*be, cnet.params(), net.num_params());
    r.buffers = download(*be, net.buffers(), net.num_buffers());
    be->release(d_x);
    be->release(d_y);
    be->release(d_dl);
  }
  return r;
}

// |a - b| <= tol * max |b| over the whole tensor: only the batch norms' summation order differs.
::testing::AssertionResult close(const std::vector<float>& a, const std::vector<float>& b, double tol,
                                 const char* what) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": " << a.size() << " vs " << b.size();
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(e <= worst)) worst = e, at = i;  // NaN counts as the worst
  }
  if (worst <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " [" << at << "]: " << a[at] << " vs " << b[at] << " (scale "
                                       << scale << ")";
}

void expect_same_training(const Trace& blk, const Trace& nhwc) {
  ASSERT_EQ(blk.losses.size(), nhwc.losses.size());
  for (size_t s = 0; s < blk.losses.size(); ++s)
    EXPECT_NEAR(blk.losses[s], nhwc.losses[s], 1e-5 * std::fabs(nhwc.losses[s])) << "step " << s;
  EXPECT_TRUE(close(blk.params, nhwc.params, 1e-5, "weights"));
  EXPECT_TRUE(close(blk.buffers, nhwc.buffers, 1e-5, "batch-norm running statistics"));
  EXPECT_TRUE(close(blk.eval_logits, nhwc.eval_logits, 1e-4, "evaluation logits"));
}

bool cpu_has_winograd() {
  DnnlOps ops(1);
  ConvDesc d;
  d.n = 1, d.h = d.w = 4, d.c = d.k = 32, d.r = d.s = 3, d.pad_h = d.pad_w = 1;
  return ops.blocked_ok(d);
}

// The number of blocks whose summary line says nChw16c.
int blocked_blocks(const std::string& summary) {
  int n = 0;
  for (size_t at = summary.find("nChw16c"); at != std::string::npos; at = summary.find("nChw16c", at + 1)) ++n;
  return n;
}

struct Case {
  const char* what;
  Model model;
  BnOptions bn;
  bool recompute;
  int blocked;  // blocks that keep tensors in nChw16c
};

class BlockedLayout : public ::testing::TestWithParam<Case> {};

TEST_P(BlockedLayout, TrainsAndEvaluatesAsNhwc) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  const Case& c = GetParam();
  const Trace blk = train(true, c.model, DType::kF32, c.bn, c.recompute);
  const Trace nhwc = train(false, c.model, DType::kF32, c.bn, c.recompute);
  EXPECT_EQ(blocked_blocks(blk.summary), c.blocked) << blk.summary;
  EXPECT_EQ(blocked_blocks(nhwc.summary), 0) << nhwc.summary;
  expect_same_training(blk, nhwc);
}

BnOptions ghost() {
  BnOptions o;
  o.group = 2;
  return o;
}

// ResNet-20: stages 2 and 3 (32 and 64 channels; their first blocks' stride-2 convolutions run direct, their
// second convolutions blocked). The bottleneck net: the 3x3 convolutions of both blocks. The projection net:
// the first block's output and the second block whole, the third block's second convolution.
INSTANTIATE_TEST_SUITE_P(Models, BlockedLayout,
                         ::testing::Values(Case{"resnet20", Model::kResnet20, {}, false, 6},
                                           Case{"resnet20_ghost", Model::kResnet20, ghost(), false, 6},
                                           Case{"resnet20_recompute", Model::kResnet20, {}, true, 6},
                                           Case{"bottleneck", Model::kBottleneck, {}, false, 2},
                                           Case{"projection", Model::kProjection, {}, false, 3}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.what); });

// 16-bit nets and synchronised batch norm stay NHWC (no Winograd kernels in bf16; no blocked statistics ops).
TEST(BlockedLayout, NotForBf16OrSynchronisedBatchNorm) {
  const test::OnednnWinogradPath onednn_path;
  if (!cpu_has_winograd())
    GTEST_SKIP() << "oneDNN's Winograd kernels need AVX-512 (this CPU, or ONEDNN_MAX_CPU_ISA, lacks it)";
  auto be = make_cpu_backend(1, CpuKernels::kFast);
  for (int variant = 0; variant < 2; ++variant) {
    Net net(*be, Dims{kSide, kSide, 3}, kClasses);
    BnOptions bn;
    bn.sync = variant == 1;
    net.set_dtype(variant == 0 ? DType::kBF16 : DType::kF32);
    add_model(net, Model::kResnet20, bn);
    net.build(kBatch, 11);
    const std::string s = net.summary();
    EXPECT_EQ(blocked_blocks(s), 0) << (variant == 0 ? "bf16" : "synchronised batch norm") << "\n" << s;
  }
}

}  // namespace
}  // namespace cnn::test
