// Nets as graphs (Net::add with named inputs): gradients of a graph with branches, an output read by several
// layers and a layer reading one output twice, against finite differences; a residual block written as a
// graph computes what the zoo's fused block computes, under the same parameter names (bit for bit where the
// fast CPU backend's convolution adds the main path's input gradient to the shortcut's); 16-bit graphs; and the
// errors a malformed graph gets.
#include <gtest/gtest.h>

#include <map>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "src/model/blocks.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "tests/common/backend_targets.h"
#include "tests/common/fd_check.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

std::vector<float> download(Backend& be, const void* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

// input -> a: conv -> r: 1x1 conv -> b: conv -> s: add(b, a) -> t: add(s, s) -> u: add(t, c), c: conv of the
// input -> flatten -> fc. a is read by r and s (fan-out), s twice by t, the input by a and c. No ReLU: a
// finite-difference step must not cross a kink.
void build_branchy(Net& net, int classes) {
  net.add(make_conv2d("a", 3, {3, 1, 1, true}), {"input"});
  net.add(make_conv2d("r", 3, {1, 1, 0, false}), {"a"});
  net.add(make_conv2d("b", 3, {3, 1, 1, true}), {"r"});
  net.add(make_add("s"), {"b", "a"});
  net.add(make_add("t"), {"s", "s"});
  net.add(make_conv2d("c", 3, {1, 1, 0, false}), {"input"});
  net.add(make_add("u"), {"t", "c"});
  net.add(make_flatten("flat"), {"u"});
  net.add(make_linear("fc", classes), {"flat"});
}

TEST(GraphNet, GradientsMatchCentralDifferences) {
  auto be = make_reference_backend();
  constexpr int kN = 2, kClasses = 4;
  const Dims in{5, 4, 2};
  Net net(*be, in, kClasses);
  build_branchy(net, kClasses);
  net.build(kN, 7);
  EXPECT_FALSE(net.is_chain());
  // The summary names what each layer of a graph reads.
  EXPECT_NE(net.summary().find("<- t, c"), std::string::npos) << net.summary();
  const std::vector<float> x = random_vec(in.size() * kN, 3);
  const std::vector<float> r = random_vec(static_cast<size_t>(kN) * kClasses, 4);
  float* d_x = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  float* d_r = static_cast<float*>(be->alloc(sizeof(float) * r.size()));
  be->upload(d_x, x.data(), sizeof(float) * x.size());
  be->upload(d_r, r.data(), sizeof(float) * r.size());
  const auto loss = [&] { return dot(download(*be, net.forward(d_x, kN, true), r.size()), r); };
  loss();
  net.zero_grads();
  std::vector<size_t> ready;
  net.backward(d_r, kN, [&](size_t off) { ready.push_back(off); });
  // Reverse layer order: the offsets from which the gradient is final only go down, and end at 0.
  ASSERT_EQ(ready.size(), 9u);
  for (size_t i = 1; i < ready.size(); ++i) EXPECT_LE(ready[i], ready[i - 1]);
  EXPECT_EQ(ready.back(), 0u);
  const std::vector<float> analytic = download(*be, net.grads(), net.num_params());
  std::vector<float> p = download(*be, static_cast<const Net&>(net).params(), net.num_params());
  FdConfig cfg;
  EXPECT_TRUE(fd_check(p, analytic, loss, "graph parameters", cfg,
                       [&](size_t i) { be->upload(net.params() + i, &p[i], sizeof(float)); }));
  be->release(d_x);
  be->release(d_r);
}

// The zoo's basic block (fused batch norm + join + ReLU) and the same block as a graph of plain layers, under
// the same parameter names, on the fast CPU backend and the emulated CUDA backend, in fp32 and bf16; `c` channels
// from the stem on (an identity shortcut).
struct BlockNets {
  Net zoo, graph;
  BlockNets(Backend& be, const Dims& in, int classes, DType t, int c = 4)
      : zoo(be, in, classes), graph(be, in, classes) {
    zoo.add(make_conv2d("stem", c, {3, 1, 1, false}));
    zoo.add(make_basic_block("layer1.0", c, 1, Shortcut::kPad));
    zoo.add(make_global_avgpool("avgpool"));
    zoo.add(make_flatten("flatten"));
    zoo.add(make_linear("fc", classes));
    graph.add(make_conv2d("stem", c, {3, 1, 1, false}));
    graph.add(make_conv2d("layer1.0.conv1", c, {3, 1, 1, false}));
    graph.add(make_batchnorm("layer1.0.bn1", {}, true));
    graph.add(make_conv2d("layer1.0.conv2", c, {3, 1, 1, false}));
    graph.add(make_batchnorm("layer1.0.bn2", {}));
    graph.add(make_add("layer1.0.add"), {"layer1.0.bn2", "stem"});
    graph.add(make_relu("layer1.0.relu"));
    graph.add(make_global_avgpool("avgpool"));
    graph.add(make_flatten("flatten"));
    graph.add(make_linear("fc", classes));
    zoo.set_dtype(t);
    graph.set_dtype(t);
  }
  // Both built (the graph with the zoo's parameters), one training forward and backward of each on the same
  // input and output gradient: "zoo logits", "graph grads", ... (fp32 copies).
  std::map<std::string, std::vector<float>> run(Backend& be, const Dims& in, int n, int classes, DType t) {
    zoo.build(n, 11);
    graph.build(n, 12);
    EXPECT_TRUE(zoo.is_chain());
    EXPECT_FALSE(graph.is_chain());
    // Same names, same shapes, same order: the graph's parameters are the zoo's.
    EXPECT_EQ(zoo.param_table().size(), graph.param_table().size());
    for (size_t i = 0; i < zoo.param_table().size() && i < graph.param_table().size(); ++i) {
      EXPECT_EQ(zoo.param_table()[i].name, graph.param_table()[i].name);
      EXPECT_EQ(zoo.param_table()[i].shape, graph.param_table()[i].shape);
    }
    std::map<std::string, std::vector<float>> got;
    if (zoo.num_params() != graph.num_params()) {
      ADD_FAILURE() << "parameter counts differ: " << zoo.num_params() << " and " << graph.num_params();
      return got;
    }
    be.copy(graph.params(), static_cast<const Net&>(zoo).params(), sizeof(float) * zoo.num_params());
    graph.sync_weight_copy();
    const std::vector<float> x = random_vec(in.size() * n, 5);
    float* d_x = static_cast<float*>(be.alloc(sizeof(float) * x.size()));
    be.upload(d_x, x.data(), sizeof(float) * x.size());
    const size_t nl = static_cast<size_t>(n) * classes;
    std::vector<float> r = random_vec(nl, 6);
    float* d_r32 = static_cast<float*>(be.alloc(sizeof(float) * nl));
    be.upload(d_r32, r.data(), sizeof(float) * nl);
    void* d_r = be.alloc(sizeof(float) * nl);
    be.convert(nl, DType::kF32, d_r32, t, d_r);
    for (Net* net : {&zoo, &graph}) {
      const std::string which = net == &zoo ? "zoo " : "graph ";
      const void* y = net->forward(d_x, n, true);
      float* y32 = static_cast<float*>(be.alloc(sizeof(float) * nl));
      be.convert(nl, t, y, DType::kF32, y32);
      got[which + "logits"] = download(be, y32, nl);
      be.release(y32);
      net->zero_grads();
      net->backward(d_r, n);
      got[which + "grads"] = download(be, net->grads(), net->num_params());
      got[which + "buffers"] = download(be, net->buffers(), net->num_buffers());
    }
    be.release(d_x);
    be.release(d_r);
    be.release(d_r32);
    return got;
  }
};

class GraphBlock : public ::testing::TestWithParam<std::tuple<BackendTarget, DType>> {};

TEST_P(GraphBlock, ComputesWhatTheFusedZooBlockComputes) {
  TargetBackend tb(std::get<0>(GetParam()));
  if (!tb.skip_reason().empty()) GTEST_SKIP() << tb.skip_reason();
  Backend& be = *tb.get();
  const DType t = std::get<1>(GetParam());
  constexpr int kN = 3, kClasses = 5;
  const Dims in{6, 6, 3};
  BlockNets nets(be, in, kClasses, t);
  auto got = nets.run(be, in, kN, kClasses, t);
  const double tol = t == DType::kF32 ? 1e-5 : 2e-2;
  EXPECT_TRUE(all_close(got["graph logits"], got["zoo logits"], tol, tol, "logits"));
  EXPECT_TRUE(all_close(got["graph grads"], got["zoo grads"], tol, 10 * tol, "parameter gradients"));
  EXPECT_TRUE(all_close(got["graph buffers"], got["zoo buffers"], 1e-6, 1e-5, "running statistics"));
}

// At 16 channels the fast CPU backend runs the block's 3x3 convolutions on its Winograd kernels, and the first
// one adds its input gradient into the block's dx, where the join's batch norm wrote the shortcut's gradient
// (Backend::conv2d_backward_data_add); the graph's add node sums the two gradients with an axpy instead. Both are
// one rounding of the same two terms, and every other op is the same kernel: the same bits throughout.
TEST(GraphBlock, ConvolutionAddingTheShortcutsGradientGivesTheGraphsBits) {
  auto be = make_cpu_backend(2, CpuKernels::kFast);
  constexpr int kN = 4, kClasses = 5, kC = 16;
  const Dims in{8, 8, 3};
  ConvDesc conv1;
  conv1.n = kN, conv1.h = conv1.w = 8, conv1.c = conv1.k = kC, conv1.r = conv1.s = 3, conv1.pad_h = conv1.pad_w = 1;
  ASSERT_TRUE(be->conv2d_backward_data_adds(DType::kF32, conv1)) << "the block's first convolution must add";
  BlockNets nets(*be, in, kClasses, DType::kF32, kC);
  auto got = nets.run(*be, in, kN, kClasses, DType::kF32);
  for (const char* what : {"logits", "grads", "buffers"}) {
    ASSERT_FALSE(got[std::string("zoo ") + what].empty()) << what;
    EXPECT_TRUE(got[std::string("zoo ") + what] == got[std::string("graph ") + what]) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, GraphBlock,
                         ::testing::Combine(::testing::Values(BackendTarget{"cpu", TargetKind::kCpu, 1, 0},
                                                              BackendTarget{"emu", TargetKind::kEmu, 1, 0},
                                                              BackendTarget{"cuda", TargetKind::kGpu}),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         [](const ::testing::TestParamInfo<std::tuple<BackendTarget, DType>>& i) {
                           return std::get<0>(i.param).name + "_" + dtype_name(std::get<1>(i.param));
                         });

// Exit-2 errors that name the layer.
void expect_usage_error(const std::function<void()>& f, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying '" << words << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(GraphNet, MalformedGraphsAreRefusedNamingTheLayer) {
  auto be = make_reference_backend();
  const Dims in{4, 4, 2};
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}), {"input"});
    net.add(make_add("s"), {"a", "later"});
  }, "layer 's' reads 'later', which is no earlier layer");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}), {"input"});
    net.add(make_relu("r"), {"a", "a"});
  }, "layer 'r' (relu) takes one input, not 2");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}));
    net.add(make_relu("a"), {"a"});
  }, "two layers are named 'a'");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}));
    net.add(make_conv2d("b", 4, {3, 2, 1, true}), {"input"});
    net.add(make_add("s"), {"a", "b"});
    net.add(make_flatten("f"));
    net.add(make_linear("fc", 3));
    net.build(2, 1);
  }, "layer 's' (add) joins inputs of different shapes, 4x4x3 and 2x2x4");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}));
    net.add(make_conv2d("dead", 3, {3, 1, 1, true}), {"input"});
    net.add(make_flatten("f"), {"a"});
    net.add(make_linear("fc", 3));
    net.build(2, 1);
  }, "the output of layer 'dead'");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}));
    net.add(make_conv2d("b", 4, {3, 1, 1, true}), {"input"});
    net.add(make_mul("m"), {"a", "b"});
    net.add(make_flatten("f"));
    net.add(make_linear("fc", 3));
    net.build(2, 1);
  }, "layer 'm' (mul) multiplies 4x4x3 by 4x4x4");
  expect_usage_error([&] {
    Net net(*be, in, 3);
    net.add(make_conv2d("a", 3, {3, 1, 1, true}));
    net.add(make_conv2d("b", 4, {3, 2, 1, true}), {"input"});
    net.add(make_concat("c"), {"a", "b"});
    net.add(make_flatten("f"));
    net.add(make_linear("fc", 3));
    net.build(2, 1);
  }, "layer 'c' (concat) joins 4x4x3 and 2x2x4");
}

}  // namespace
}  // namespace cnn::test
