// Finite-difference gradient checks of every layer kind, the loss and a whole net, on every backend of the
// sweep (the reference kernels included): input and parameter gradients of L = sum(y * r) against
// tests/common/fd_check.h, in training mode, on ragged shapes. The checker's own test plants 0.1% errors.
#include <algorithm>
#include <cmath>
#include <memory>

#include "src/model/blocks.h"
#include "src/model/layers.h"
#include "src/model/net.h"
#include "tests/common/backend_targets.h"
#include "tests/common/fd_check.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

// A layer with its parameters, gradients and buffers in device memory of one backend, mirrored on the host.
class DeviceLayer {
 public:
  // away_from_kinks (residual blocks and chains): every batch norm gets gamma in [0.2, 0.4] and, on the main
  // path, beta in [5, 6] for even channels and [-6, -5] for odd ones, so each ReLU input is at least ~3 from 0
  // (|xhat| stays below ~4) and the ReLUs of odd channels are off: the gating is exercised, yet no
  // finite-difference step crosses a kink. Shortcut batch norms ("downsample") get beta in [-1, 1], so the residual join
  // a + b keeps the sign of the main path.
  DeviceLayer(Backend& be, std::unique_ptr<Layer> l, Dims in, int n, uint64_t seed, bool away_from_kinks)
      : be_(be), layer_(std::move(l)), in_(in), n_(n) {
    out_ = layer_->setup(in);
    std::vector<float*> bp;
    const auto specs = layer_->param_specs();
    for (size_t i = 0; i < specs.size(); ++i) {
      const bool gamma = specs[i].init == Init::kOne;
      const bool beta = i > 0 && specs[i - 1].init == Init::kOne && specs[i].init == Init::kZero;
      std::vector<float> v = random_vec(specs[i].size(), seed + i);  // uniform in [-1, 1]
      if (gamma) v = away_from_kinks ? random_vec(v.size(), seed + i, 0.2f, 0.4f) : random_vec(v.size(), seed + i, 0.5f, 1.5f);
      if (beta && away_from_kinks && specs[i].name.find("downsample") == std::string::npos)
        for (size_t j = 0; j < v.size(); ++j) v[j] = (j % 2 ? -5.5f : 5.5f) + 0.5f * v[j];
      p.push_back(v);
      d_p.push_back(upload(p.back()));
      d_g.push_back(upload(std::vector<float>(specs[i].size(), 0.f)));
    }
    for (const auto& s : layer_->buffer_specs())
      bp.push_back(upload(std::vector<float>(s.size(), s.init == Init::kOne ? 1.f : 0.f)));
    layer_->bind(d_p, d_g);
    layer_->bind_buffers(bp);
    layer_->allocate(be, n);
  }
  ~DeviceLayer() {
    layer_.reset();  // releases its scratch through the backend first
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) be_.release(*it);
  }

  float* upload(const std::vector<float>& h) {
    held_.push_back(be_.alloc(sizeof(float) * std::max<size_t>(h.size(), 1)));
    be_.upload(held_.back(), h.data(), sizeof(float) * h.size());
    return static_cast<float*>(held_.back());
  }
  std::vector<float> download(const float* d, size_t n) {
    std::vector<float> h(n);
    be_.download(h.data(), d, sizeof(float) * n);
    return h;
  }
  Layer& layer() { return *layer_; }
  const Dims& out() const { return out_; }

  std::vector<std::vector<float>> p;  // host mirrors of the parameters
  std::vector<float*> d_p, d_g;

 private:
  Backend& be_;
  std::unique_ptr<Layer> layer_;
  Dims in_, out_;
  int n_;
  std::vector<void*> held_;
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

struct GradCase {
  std::string name;
  std::function<std::unique_ptr<Layer>()> make;
  Dims in;
  int n;
  uint64_t seed;
  bool away_from_zero = false;  // ReLU: inputs +-[0.05, 1], no finite-difference step reaches the kink
  bool distinct = false;   // max pooling: inputs 0.05 apart, so no step changes a window's winner
  bool away_from_kinks = false;  // residual blocks: see DeviceLayer
  float step = 2e-2f;
  double atol = 1e-4;  // FdConfig::atol
};

std::vector<GradCase> grad_cases() {
  auto block_case = [](std::string name, std::function<std::unique_ptr<Layer>()> make, Dims in, uint64_t seed) {
    GradCase c{std::move(name), std::move(make), in, 2, seed};
    c.away_from_kinks = true;
    // No kink within reach (see DeviceLayer): a large step keeps the rounding noise of the deeper forward pass
    // (values up to ~20) down; what remains, ~2e-4 of the layer's largest derivative, sets atol.
    c.step = 0.1f;
    c.atol = 3e-4;
    return c;
  };
  std::vector<GradCase> v = {
      {"conv_stride1_pad1_bias", [] { return make_conv2d("c", 5, {3, 1, 1, true}); }, {6, 7, 3}, 2, 1},
      {"conv_stride2_pad1", [] { return make_conv2d("c", 4, {3, 2, 1, true}); }, {7, 6, 2}, 3, 2},
      {"conv_5x5_no_bias_no_pad", [] { return make_conv2d("c", 3, {5, 1, 0, false}); }, {8, 9, 2}, 2, 3},
      {"conv_1x1_stride2", [] { return make_conv2d("c", 6, {1, 2, 0, true}); }, {5, 5, 4}, 2, 4},
      // Grouped, depthwise (channel multiplier 2, stride 2) and dilated with asymmetric padding (ConvOptions:
      // kernel, stride, pad, bias, groups, dilation, extra_pad_h, extra_pad_w).
      {"conv_groups2", [] { return make_conv2d("c", 6, {3, 1, 1, true, 2}); }, {6, 5, 4}, 2, 21},
      {"conv_depthwise_stride2", [] { return make_conv2d("c", 8, {3, 2, 1, true, 4}); }, {7, 6, 4}, 2, 22},
      {"conv_dilated_asymmetric", [] { return make_conv2d("c", 4, {3, 2, 1, false, 1, 2, 1, 2}); }, {8, 7, 3}, 2, 23},
      {"linear", [] { return make_linear("fc", 7); }, {3, 2, 5}, 4, 5},
      {"linear_no_bias", [] { return make_linear("fc", 3, false); }, {1, 1, 11}, 3, 6},
      {"relu", [] { return make_relu("r"); }, {3, 4, 5}, 2, 7, true},
      {"maxpool_2x2", [] { return make_maxpool("p", 2, 2); }, {6, 7, 3}, 2, 8, false, true},
      {"maxpool_3x3_stride2_pad1", [] { return make_maxpool("p", 3, 2, 1); }, {7, 5, 2}, 2, 9, false, true},
      {"batchnorm", [] { return make_batchnorm("bn"); }, {3, 5, 7}, 3, 10},
      {"batchnorm_1x1", [] { return make_batchnorm("bn", {0.2f, 1e-3f}); }, {1, 1, 9}, 5, 11},
      {"batchnorm_ghost_groups", [] { return make_batchnorm("bn", {0.1f, 1e-5f, 2}); }, {3, 5, 7}, 4, 12},
      {"dropout", [] { return make_dropout("d", 0.3f); }, {2, 3, 5}, 3, 13},
      {"avgpool_2x2", [] { return make_avgpool("p", 2, 2); }, {6, 7, 3}, 2, 14},
      {"avgpool_3x3_stride2_pad1", [] { return make_avgpool("p", 3, 2, 1); }, {7, 5, 2}, 2, 15},
      {"global_avgpool", [] { return make_global_avgpool("g"); }, {3, 5, 4}, 3, 16},
  };
  v.push_back(block_case("basic_block_identity",
                         [] { return make_basic_block("b", 4, 1, Shortcut::kProjection); }, {5, 6, 4}, 17));
  v.push_back(block_case("basic_block_projection_stride2",
                         [] { return make_basic_block("b", 6, 2, Shortcut::kProjection); }, {5, 7, 3}, 18));
  v.push_back(block_case("basic_block_pad_stride2",
                         [] { return make_basic_block("b", 5, 2, Shortcut::kPad); }, {7, 6, 3}, 19));
  // Batch norm with its ReLU fused: kept clear of the kink as the blocks are (outputs near +-5.5 round like a
  // block's, hence the block's step and atol).
  auto fused_bn_case = [&](std::string name, std::function<std::unique_ptr<Layer>()> make, Dims in, int n,
                           uint64_t seed) {
    GradCase c = block_case(std::move(name), std::move(make), in, seed);
    c.n = n;
    return c;
  };
  v.push_back(fused_bn_case("batchnorm_relu", [] { return make_batchnorm("bn", {}, true); }, {3, 5, 7}, 3, 23));
  v.push_back(fused_bn_case("batchnorm_relu_ghost_groups",
                            [] { return make_batchnorm("bn", {0.1f, 1e-5f, 2}, true); }, {3, 4, 17}, 4, 24));
  v.push_back(block_case("bottleneck", [] { return make_bottleneck_block("b", 2, 2); }, {5, 5, 3}, 20));
  v.push_back(block_case("bottleneck_identity", [] { return make_bottleneck_block("b", 2, 1); }, {4, 3, 8}, 21));
  v.push_back(block_case("chain_conv_bn_relu_conv",
                         [] {
                           std::vector<std::unique_ptr<Layer>> l;
                           l.push_back(make_conv2d("c1", 4, {3, 1, 1, false}));
                           l.push_back(make_batchnorm("bn1"));
                           l.push_back(make_relu("r"));
                           l.push_back(make_conv2d("c2", 3, {3, 2, 1, true}));
                           return make_chain("ch", std::move(l));
                         },
                         {5, 6, 2}, 22));
  return v;
}

// Emulated and GPU backends check a sample of the elements: every one costs four forward passes.
FdConfig fd_config(const BackendTarget& t, const GradCase& c) {
  FdConfig cfg;
  cfg.step = c.step;
  cfg.atol = c.atol;
  if (t.kind != TargetKind::kReference && t.kind != TargetKind::kCpu) cfg.max_elements = 48;
  return cfg;
}

// One layer case on one backend: inputs, the analytic gradients of one backward pass, and the checks.
// Tensor 0 is the input x, tensors 1.. the parameters.
class LayerUnderTest {
 public:
  LayerUnderTest(Backend& be, const GradCase& c, const FdConfig& cfg)
      : be_(be), c_(c), dl_(be, c.make(), c.in, c.n, c.seed, c.away_from_kinks), cfg_(cfg) {
    Layer& l = dl_.layer();
    x_ = random_vec(c.in.size() * c.n, c.seed + 50);
    if (c.away_from_zero)
      for (float& v : x_) v = v < 0 ? std::min(v, -0.05f) : std::max(v, 0.05f);
    if (c.distinct)
      for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>((i * 7919) % x_.size()) * 0.05f - 1.f;
    d_x_ = dl_.upload(x_);
    d_y_ = dl_.upload(std::vector<float>(dl_.out().size() * c.n, 0.f));
    d_dx_ = dl_.upload(std::vector<float>(x_.size(), 0.f));
    r_ = random_vec(dl_.out().size() * c.n, c.seed + 99);
    d_r_ = dl_.upload(r_);
    const std::vector<int64_t> ids = {17, 3, 900, 5, 42};  // global sample ids: dropout's masks
    std::vector<int64_t> mine(ids.begin(), ids.begin() + c.n);
    d_ids_ = be.alloc(sizeof(int64_t) * mine.size());
    be.upload(d_ids_, mine.data(), sizeof(int64_t) * mine.size());
    l.set_batch({7, 11, static_cast<const int64_t*>(d_ids_)});
    loss();
    l.backward(be, d_x_, d_y_, d_r_, d_dx_, c.n);
    grads_.push_back(dl_.download(d_dx_, x_.size()));
    names_.push_back("dx");
    for (size_t i = 0; i < l.param_specs().size(); ++i) {
      grads_.push_back(dl_.download(dl_.d_g[i], dl_.p[i].size()));
      names_.push_back("d" + l.param_specs()[i].name);
    }
    // A tensor behind a ReLU that is off has derivatives that all vanish: the numeric ones are then rounding
    // noise of the forward pass, whose size follows the layer's largest derivative, not the tensor's.
    for (const auto& g : grads_) cfg_.scale_floor = std::max(cfg_.scale_floor, 0.1 * max_abs(g));
  }
  ~LayerUnderTest() { be_.release(d_ids_); }

  size_t num_tensors() const { return grads_.size(); }
  double scale_floor() const { return cfg_.scale_floor; }
  const std::vector<float>& gradient(size_t t) const { return grads_[t]; }
  ::testing::AssertionResult check(size_t t, const std::vector<float>& analytic) {
    std::vector<float>& v = t == 0 ? x_ : dl_.p[t - 1];
    float* d = t == 0 ? d_x_ : dl_.d_p[t - 1];
    return fd_check(v, analytic, [this] { return loss(); }, c_.name + " " + names_[t], cfg_,
                    [&](size_t i) { be_.upload(d + i, &v[i], sizeof(float)); });
  }
  // Parameter gradients accumulate, and a null dx (a first layer) still yields them.
  ::testing::AssertionResult check_accumulation() {
    if (num_tensors() == 1) return ::testing::AssertionSuccess();
    loss();
    dl_.layer().backward(be_, d_x_, d_y_, d_r_, nullptr, c_.n);
    std::vector<float> twice = grads_.back();
    for (auto& v : twice) v *= 2;
    return all_close(dl_.download(dl_.d_g.back(), twice.size()), twice, 1e-5, 1e-4, "accumulated " + names_.back());
  }

 private:
  double loss() {
    dl_.layer().forward(be_, d_x_, d_y_, c_.n, true);
    return dot(dl_.download(d_y_, r_.size()), r_);
  }

  Backend& be_;
  const GradCase& c_;
  DeviceLayer dl_;
  FdConfig cfg_;
  std::vector<float> x_, r_;
  float *d_x_, *d_y_, *d_dx_, *d_r_;
  void* d_ids_;
  std::vector<std::vector<float>> grads_;
  std::vector<std::string> names_;
};

struct GradParam {
  BackendTarget target;
  GradCase c;
};

class LayerGrad : public ::testing::TestWithParam<GradParam> {};

TEST_P(LayerGrad, MatchesCentralDifferences) {
  TargetBackend tb(GetParam().target);
  if (!tb.skip_reason().empty()) GTEST_SKIP() << tb.skip_reason();
  LayerUnderTest lt(*tb.get(), GetParam().c, fd_config(GetParam().target, GetParam().c));
  for (size_t t = 0; t < lt.num_tensors(); ++t) EXPECT_TRUE(lt.check(t, lt.gradient(t)));
  EXPECT_TRUE(lt.check_accumulation());
}

// The checker itself: on the reference kernels, gradients 0.1% off fail, whether the whole tensor is scaled
// or only its largest element, for a plain layer, a curved one (batch norm) and a residual block; the true
// gradients pass. Planted in every tensor whose derivatives are not all far below the layer's largest (a
// tensor whose largest derivative is under a tenth of the layer's is checked against the layer's rounding
// noise instead, see LayerUnderTest).
TEST(FdCheck, PlantedErrorsOfOneTenthPercentFail) {
  auto be = make_reference_backend();
  int checked = 0;
  for (const GradCase& c : grad_cases()) {
    if (c.name != "conv_stride1_pad1_bias" && c.name != "batchnorm" && c.name != "basic_block_projection_stride2")
      continue;
    LayerUnderTest lt(*be, c, fd_config({"reference", TargetKind::kReference}, c));
    for (size_t t = 0; t < lt.num_tensors(); ++t) {
      const std::vector<float>& g = lt.gradient(t);
      if (max_abs(g) < lt.scale_floor()) continue;
      ASSERT_TRUE(lt.check(t, g));
      std::vector<float> scaled = g, one = g;
      for (float& v : scaled) v *= 1.001f;
      const size_t big = std::max_element(g.begin(), g.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) - g.begin();
      one[big] *= 1.001f;
      EXPECT_FALSE(lt.check(t, scaled)) << c.name << " tensor " << t << ": a gradient scaled by 1.001 passed";
      EXPECT_FALSE(lt.check(t, one)) << c.name << " tensor " << t << ": element " << big << " 0.1% off passed";
      ++checked;
    }
  }
  EXPECT_GE(checked, 6);
}

std::vector<GradParam> grad_params() {
  std::vector<BackendTarget> targets = {{"reference", TargetKind::kReference}};
  for (const auto& t : backend_targets(1)) targets.push_back(t);  // one emulator schedule: the sweep has all
  std::vector<GradParam> v;
  for (const auto& t : targets)
    for (const auto& c : grad_cases()) v.push_back({t, c});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Backends, LayerGrad, ::testing::ValuesIn(grad_params()),
                         [](const ::testing::TestParamInfo<GradParam>& i) {
                           return i.param.c.name + "__" + i.param.target.name;
                         });

}  // namespace
}  // namespace cnn::test
