// Finite-difference gradient checks of the graph-network ops (kernels/activation.h, kernels/join.h), which no
// layer uses yet: on every backend of the sweep (the reference kernels included), each op's backward, run
// with dy = r, must match the central differences of L = sum(op(inputs) * r) with respect to each input
// (tests/common/fd_check.h); run again with accumulate it must add the same gradient onto the first. Add's
// gradient is dy itself (a copy, backend.h), so it has no case here. A planted 0.1% error must fail.
#include <algorithm>
#include <cmath>
#include <functional>

#include "tests/common/backend_targets.h"
#include "tests/common/fd_check.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

using Ptrs = std::vector<float*>;

struct OpGradCase {
  std::string name;
  std::vector<std::vector<float>> inputs;
  size_t out;
  std::function<void(Backend&, const Ptrs& in, float* y)> forward;
  // grads[i]: the gradient of inputs[i].
  std::function<void(Backend&, const Ptrs& in, const float* dy, const Ptrs& grads, bool accumulate)> backward;
};

// x in [lo, hi), each value at least 0.06 from the activation's kinks: no step of the check crosses one.
std::vector<float> away_from_kinks(const Activation& a, size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> kinks;
  switch (a.kind) {
    case ActKind::kLeakyRelu: kinks = {0.f}; break;
    case ActKind::kClip: kinks = {a.alpha, a.beta}; break;
    case ActKind::kHardSigmoid: kinks = {-a.beta / a.alpha, (1.f - a.beta) / a.alpha}; break;
    case ActKind::kHardSwish: kinks = {-3.f, 3.f}; break;
    case ActKind::kSigmoid:
    case ActKind::kSilu: break;
  }
  std::vector<float> x = random_vec(n, seed, lo, hi);
  for (float& v : x)
    for (float k : kinks)
      if (std::fabs(v - k) < 0.06f) v = k + (v < k ? -0.06f : 0.06f);
  return x;
}

OpGradCase activation_case(const std::string& name, Activation a, float lo, float hi, uint64_t seed) {
  const size_t n = 40;
  return {name, {away_from_kinks(a, n, seed, lo, hi)}, n,
          [=](Backend& be, const Ptrs& in, float* y) { be.activation_forward(DType::kF32, a, n, in[0], y); },
          [=](Backend& be, const Ptrs& in, const float* dy, const Ptrs& g, bool acc) {
            be.activation_backward(DType::kF32, a, n, in[0], dy, g[0], acc);
          }};
}

OpGradCase mul_case(const std::string& name, int n, int hw, int c, uint64_t seed) {
  const size_t xs = static_cast<size_t>(n) * hw * c, ss = static_cast<size_t>(n) * c;
  return {name, {random_vec(xs, seed), random_vec(ss, seed + 1)}, xs,
          [=](Backend& be, const Ptrs& in, float* y) { be.mul_forward(DType::kF32, n, hw, c, in[0], in[1], y); },
          [=](Backend& be, const Ptrs& in, const float* dy, const Ptrs& g, bool acc) {
            be.mul_backward(DType::kF32, n, hw, c, in[0], in[1], dy, g[0], g[1], acc);
          }};
}

OpGradCase concat_case(const std::string& name, int rows, std::vector<int> channels, uint64_t seed) {
  OpGradCase c{name, {}, 0, nullptr, nullptr};
  for (size_t i = 0; i < channels.size(); ++i) {
    c.inputs.push_back(random_vec(static_cast<size_t>(rows) * channels[i], seed + i));
    c.out += c.inputs.back().size();
  }
  const int k = static_cast<int>(channels.size());
  c.forward = [=](Backend& be, const Ptrs& in, float* y) {
    const std::vector<const void*> x(in.begin(), in.end());
    be.concat_forward(DType::kF32, rows, k, channels.data(), x.data(), y);
  };
  c.backward = [=](Backend& be, const Ptrs&, const float* dy, const Ptrs& g, bool acc) {
    const std::vector<void*> dx(g.begin(), g.end());
    be.concat_backward(DType::kF32, rows, k, channels.data(), dy, dx.data(), acc);
  };
  return c;
}

// Average pooling with count_include_pad and an extra row and column of padding at the end.
OpGradCase avgpool_case(const std::string& name, uint64_t seed) {
  PoolDesc d;
  d.n = 2, d.h = 5, d.w = 6, d.c = 3, d.r = d.s = 3, d.stride = 2, d.pad = 1;
  d.extra_pad_h = d.extra_pad_w = 1, d.count_include_pad = true;
  const size_t xs = static_cast<size_t>(d.n) * d.h * d.w * d.c;
  return {name, {random_vec(xs, seed)}, static_cast<size_t>(d.n) * d.p() * d.q() * d.c,
          [=](Backend& be, const Ptrs& in, float* y) { be.avgpool_forward(DType::kF32, d, in[0], y); },
          [=](Backend& be, const Ptrs&, const float* dy, const Ptrs& g, bool acc) {
            // avgpool_backward overwrites: the accumulating form is the caller's axpy.
            if (!acc) return be.avgpool_backward(DType::kF32, d, dy, g[0]);
            float* tmp = static_cast<float*>(be.alloc(sizeof(float) * xs));
            be.avgpool_backward(DType::kF32, d, dy, tmp);
            be.axpy(DType::kF32, xs, 1.f, tmp, g[0]);
            be.release(tmp);
          }};
}

std::vector<OpGradCase> op_cases() {
  return {
      activation_case("leaky_relu", {ActKind::kLeakyRelu, 0.1f, 0.f}, -2.f, 2.f, 1),
      activation_case("relu6", {ActKind::kClip, 0.f, 6.f}, -2.f, 8.f, 2),
      activation_case("sigmoid", {ActKind::kSigmoid, 0.f, 0.f}, -6.f, 6.f, 3),
      activation_case("hard_sigmoid", {ActKind::kHardSigmoid, 0.2f, 0.5f}, -4.f, 4.f, 4),
      activation_case("hard_swish", {ActKind::kHardSwish, 0.f, 0.f}, -5.f, 5.f, 5),
      activation_case("silu", {ActKind::kSilu, 0.f, 0.f}, -6.f, 6.f, 6),
      mul_case("mul_squeeze_excitation", 2, 6, 5, 7),
      mul_case("mul_same_shape", 3, 1, 7, 8),
      concat_case("concat3", 6, {3, 1, 4}, 9),
      avgpool_case("avgpool_count_include_pad_asymmetric", 10),
  };
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// One case on one backend: device copies of the inputs, the analytic gradients of one backward pass.
class OpUnderTest {
 public:
  OpUnderTest(Backend& be, const OpGradCase& c, FdConfig cfg) : be_(be), c_(c), cfg_(cfg), x_(c.inputs) {
    for (const auto& v : x_) d_x_.push_back(upload(v));
    for (const auto& v : x_) d_g_.push_back(upload(std::vector<float>(v.size(), std::nanf(""))));  // overwritten
    r_ = random_vec(c.out, 99);
    d_r_ = upload(r_);
    d_y_ = upload(std::vector<float>(c.out, 0.f));
    c.backward(be, d_x_, d_r_, d_g_, false);
    for (size_t i = 0; i < x_.size(); ++i) grads_.push_back(download(d_g_[i], x_[i].size()));
    for (const auto& g : grads_) cfg_.scale_floor = std::max(cfg_.scale_floor, 0.1 * max_abs(g));
  }
  ~OpUnderTest() {
    for (void* p : held_) be_.release(p);
  }

  size_t num_inputs() const { return x_.size(); }
  const std::vector<float>& gradient(size_t i) const { return grads_[i]; }
  ::testing::AssertionResult check(size_t i, const std::vector<float>& analytic) {
    return fd_check(x_[i], analytic, [this] { return loss(); }, c_.name + " input " + std::to_string(i), cfg_,
                    [&](size_t j) { be_.upload(d_x_[i] + j, &x_[i][j], sizeof(float)); });
  }
  // A second backward with accumulate adds the same gradients onto the first.
  ::testing::AssertionResult check_accumulation() {
    c_.backward(be_, d_x_, d_r_, d_g_, true);
    for (size_t i = 0; i < x_.size(); ++i) {
      std::vector<float> twice = grads_[i];
      for (float& v : twice) v *= 2;
      auto ok = all_close(download(d_g_[i], twice.size()), twice, 1e-6, 1e-6, c_.name + " accumulated " +
                                                                                  std::to_string(i));
      if (!ok) return ok;
    }
    return ::testing::AssertionSuccess();
  }

 private:
  double loss() {
    c_.forward(be_, d_x_, d_y_);
    return dot(download(d_y_, r_.size()), r_);
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

  Backend& be_;
  const OpGradCase& c_;
  FdConfig cfg_;
  std::vector<std::vector<float>> x_, grads_;
  std::vector<float> r_;
  Ptrs d_x_, d_g_;
  float *d_r_, *d_y_;
  std::vector<void*> held_;
};

struct OpGradParam {
  BackendTarget target;
  OpGradCase c;
};

class OpGrad : public ::testing::TestWithParam<OpGradParam> {};

TEST_P(OpGrad, MatchesCentralDifferences) {
  TargetBackend tb(GetParam().target);
  if (!tb.skip_reason().empty()) GTEST_SKIP() << tb.skip_reason();
  OpUnderTest ot(*tb.get(), GetParam().c, {});
  for (size_t i = 0; i < ot.num_inputs(); ++i) EXPECT_TRUE(ot.check(i, ot.gradient(i)));
  EXPECT_TRUE(ot.check_accumulation());
}

// On the reference kernels, every input's gradient scaled by 1.001, or its largest element alone 0.1% off,
// fails the check at these shapes and steps.
TEST(OpGradFdCheck, PlantedErrorsOfOneTenthPercentFail) {
  auto be = make_reference_backend();
  int checked = 0;
  for (const OpGradCase& c : op_cases()) {
    OpUnderTest ot(*be, c, {});
    for (size_t i = 0; i < ot.num_inputs(); ++i) {
      const std::vector<float>& g = ot.gradient(i);
      ASSERT_TRUE(ot.check(i, g));
      std::vector<float> scaled = g, one = g;
      for (float& v : scaled) v *= 1.001f;
      const auto by_size = [](float a, float b) { return std::fabs(a) < std::fabs(b); };
      const size_t big = std::max_element(g.begin(), g.end(), by_size) - g.begin();
      one[big] *= 1.001f;
      EXPECT_FALSE(ot.check(i, scaled)) << c.name << " input " << i << ": a gradient scaled by 1.001 passed";
      EXPECT_FALSE(ot.check(i, one)) << c.name << " input " << i << ": element " << big << " 0.1% off passed";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 14);  // one input per activation and the pooling, two per mul, three of the concatenation
}

std::vector<OpGradParam> op_grad_params() {
  std::vector<BackendTarget> targets = {{"reference", TargetKind::kReference}};
  for (const auto& t : backend_targets(1)) targets.push_back(t);  // one emulator schedule: the sweep has all
  std::vector<OpGradParam> v;
  for (const auto& t : targets)
    for (const auto& c : op_cases()) v.push_back({t, c});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Backends, OpGrad, ::testing::ValuesIn(op_grad_params()),
                         [](const ::testing::TestParamInfo<OpGradParam>& i) {
                           return i.param.c.name + "__" + i.param.target.name;
                         });

}  // namespace
}  // namespace cnn::test
