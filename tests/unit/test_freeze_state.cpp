// Frozen parameters hold no optimizer state (src/train/optimizer.h): the state arrays cover the trainable
// parameters only, keep their values when the trainable set changes (--train.unfreeze_at_epoch), and read and
// write checkpoints in the full layout (zero where frozen). A frozen parameter between trainable ones
// (FreezePlan::frozen_inside) is not updated and its gradient is zeroed after backward (train_step), so that
// clipping never sees a rank's own gradient there.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/cpu_backend.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "src/train/freeze.h"
#include "src/train/optimizer.h"
#include "src/train/step.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// conv1, bn1, conv2, bn2, fc: freezing conv2 leaves a frozen parameter between trainable ones.
std::unique_ptr<Net> two_conv_net(Backend& be, int max_n) {
  auto net = std::make_unique<Net>(be, Dims{6, 6, 2}, 3);
  net->add(make_conv2d("conv1", 4, {3, 1, 1, false}));
  net->add(make_batchnorm("bn1", {}, true));
  net->add(make_conv2d("conv2", 4, {3, 1, 1, false}));
  net->add(make_batchnorm("bn2", {}, true));
  net->add(make_global_avgpool("avgpool"));
  net->add(make_linear("fc", 3));
  net->build(max_n, 7);
  return net;
}

size_t size_of(const Net& net, const std::string& prefix) {
  size_t n = 0;
  for (const ParamInfo& p : net.param_table()) n += p.name.compare(0, prefix.size(), prefix) == 0 ? p.size : 0;
  return n;
}

const ParamInfo& param(const Net& net, const std::string& name) {
  for (const ParamInfo& p : net.param_table())
    if (p.name == name) return p;
  throw std::runtime_error("no parameter " + name);
}

TEST(FrozenState, OnlyTrainableParametersHoldOptimizerState) {
  auto be = make_cpu_backend(1);
  auto net = two_conv_net(*be, 2);
  OptimizerConfig oc;
  oc.kind = "adamw";
  EXPECT_EQ(make_optimizer(oc, *be, *net)->state_bytes(), 2 * sizeof(float) * net->num_params());
  oc.lr_mult = plan_freeze(*net, "conv1,bn1,conv2", "").lr_mult;
  const size_t trainable = net->num_params() - size_of(*net, "conv1") - size_of(*net, "bn1") - size_of(*net, "conv2");
  EXPECT_EQ(make_optimizer(oc, *be, *net)->state_bytes(), 2 * sizeof(float) * trainable);
  oc.kind = "sgd";
  auto sgd = make_optimizer(oc, *be, *net);
  EXPECT_EQ(sgd->state_bytes(), sizeof(float) * trainable);
  EXPECT_EQ(sgd->state_names(), std::vector<std::string>{"momentum"});
}

// Checkpoints read and write every parameter's state: zero for frozen ones, whatever was uploaded there.
TEST(FrozenState, CheckpointLayoutIsFullWithZerosWhereFrozen) {
  auto be = make_cpu_backend(1);
  auto net = two_conv_net(*be, 2);
  OptimizerConfig oc;
  oc.lr_mult = plan_freeze(*net, "conv2", "").lr_mult;
  auto opt = make_optimizer(oc, *be, *net);
  const std::vector<float> full = test::random_vec(net->num_params(), 3);
  opt->upload_state(0, full.data());
  std::vector<float> back(net->num_params(), 7.f);
  opt->download_state(0, back.data());
  const ParamInfo& w2 = param(*net, "conv2.weight");
  for (size_t i = 0; i < back.size(); ++i) {
    const bool frozen = i >= w2.offset && i < w2.offset + w2.size;
    ASSERT_EQ(back[i], frozen ? 0.f : full[i]) << i;
  }
}

// Progressive unfreezing: the state of what trained before is kept, newly trainable parameters start from
// zero state. The reference holds full state from the start, its frozen part fed zero gradients (AdamW then
// leaves those parameters and their state at exactly where they were, without weight decay).
TEST(FrozenState, UnfreezingKeepsTheStateOfWhatTrained) {
  auto be = make_cpu_backend(1);
  auto a = two_conv_net(*be, 2), b = two_conv_net(*be, 2);
  OptimizerConfig oc;
  oc.kind = "adamw";
  auto full = make_optimizer(oc, *be, *b);
  const FreezePlan plan = plan_freeze(*a, "conv1,bn1", "");
  oc.lr_mult = plan.lr_mult;
  auto frozen = make_optimizer(oc, *be, *a);
  for (int s = 0; s < 4; ++s) {
    if (s == 2) {
      std::vector<float> before(a->num_params()), after(a->num_params());
      frozen->download_state(0, before.data());
      EXPECT_LT(frozen->state_bytes(), full->state_bytes());
      frozen->set_lr_mult({});
      frozen->download_state(0, after.data());
      EXPECT_EQ(before, after);
    }
    std::vector<float> g = test::random_vec(a->num_params(), 10 + s);
    be->upload(a->grads(), g.data(), sizeof(float) * g.size());
    if (s < 2) std::fill(g.begin(), g.begin() + plan.trainable_offset, 0.f);
    be->upload(b->grads(), g.data(), sizeof(float) * g.size());
    frozen->step(0.01);
    full->step(0.01);
  }
  EXPECT_EQ(frozen->state_bytes(), full->state_bytes());
  const Net& ca = *a;
  const Net& cb = *b;
  EXPECT_EQ(std::vector<float>(ca.params(), ca.params() + ca.num_params()),
            std::vector<float>(cb.params(), cb.params() + cb.num_params()));
  for (size_t k = 0; k < 2; ++k) {
    std::vector<float> x(a->num_params()), y(a->num_params());
    frozen->download_state(k, x.data());
    full->download_state(k, y.data());
    EXPECT_EQ(x, y) << frozen->state_names()[k];
  }
}

// A frozen conv2 between trainable layers: unchanged by training with weight decay and clipping, and its
// gradient is zero after the step (its layer's backward ran: conv1 below still needs the input gradient).
TEST(FrozenState, FrozenInsideTheTrainedPartIsNotUpdatedAndHasNoGradient) {
  auto be = make_cpu_backend(1);
  const int n = 4;
  auto net = two_conv_net(*be, n);
  const FreezePlan plan = plan_freeze(*net, "conv2", "");
  const ParamInfo& w2 = param(*net, "conv2.weight");
  EXPECT_EQ(plan.trainable_offset, 0u);
  ASSERT_EQ(plan.frozen_inside, (std::vector<std::pair<size_t, size_t>>{{w2.offset, w2.offset + w2.size}}));
  OptimizerConfig oc;
  oc.weight_decay = 0.1;
  oc.lr_mult = plan.lr_mult;
  auto opt = make_optimizer(oc, *be, *net);
  StepBuffers buf = alloc_step_buffers(*be, *net, n);
  StepConfig sc;
  sc.global_batch = n;
  sc.clip_norm = 1e-3;
  sc.frozen_inside = plan.frozen_inside;
  const Net& cnet = *net;
  const std::vector<float> before(cnet.params(), cnet.params() + cnet.num_params());
  StepStats st;
  for (int s = 0; s < 2; ++s) {
    const std::vector<float> x = test::random_vec(6 * 6 * 2 * n, 20 + s);
    const std::vector<int32_t> y = {0, 1, 2, 1};
    be->upload(buf.x, x.data(), sizeof(float) * x.size());
    be->upload(buf.labels, y.data(), sizeof(int32_t) * y.size());
    sc.step = s;
    train_step(*be, *net, *opt, nullptr, buf, n, sc, 0.1, st);
  }
  for (size_t i = 0; i < net->num_params(); ++i) {
    const bool frozen = i >= w2.offset && i < w2.offset + w2.size;
    if (frozen) {
      ASSERT_EQ(cnet.params()[i], before[i]) << i;
      ASSERT_EQ(net->grads()[i], 0.f) << i;
    }
  }
  EXPECT_NE(cnet.params()[param(*net, "conv1.weight").offset], before[param(*net, "conv1.weight").offset]);
  free_step_buffers(*be, buf);
}

}  // namespace
}  // namespace cnn
