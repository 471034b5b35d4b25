// Stochastic weight averaging (src/train/swa.h, src/train/schedule.h): the average against the mean of the
// models in double; SWALR's rates against a transcription of torch.optim.swa_utils.SWALR stepped as its standard
// recipe steps it; the recomputed batch-norm statistics (update_bn) against the batch means and unbiased
// variances computed directly, for whole batches, micro-batches and ghost groups; the options' checks. On the CPU
// backend, the emulated CUDA backend and a GPU where there is one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "src/model/layers.h"
#include "src/train/config.h"
#include "src/train/schedule.h"
#include "src/train/swa.h"
#include "tests/common/backend_targets.h"
#include "tests/common/test_util.h"

namespace cnn::test {
namespace {

std::vector<float> download(Backend& be, const float* d, size_t n) {
  std::vector<float> h(n);
  be.download(h.data(), d, sizeof(float) * n);
  return h;
}

class SwaTest : public ::testing::TestWithParam<BackendTarget> {};

constexpr int kH = 4, kW = 3, kC = 3, kClasses = 5;

// The first layer is a batch norm: it normalises the input itself, so its statistics are computable directly.
void build_bn_net(Net& net, const BnOptions& bn, int max_n) {
  net.add(make_batchnorm("bn1", bn));
  net.add(make_conv2d("conv1", 4, {3, 1, 1, false}));
  net.add(make_batchnorm("bn2", bn, true));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", kClasses));
  net.build(max_n, 7);
}

const ParamInfo& buffer(const Net& net, const std::string& name) {
  for (const ParamInfo& b : net.buffer_table())
    if (b.name == name) return b;
  throw std::runtime_error("no buffer " + name);
}

TEST_P(SwaTest, AverageIsTheMeanOfTheModelsAndSwapsBack) {
  TargetBackend dev(GetParam());
  if (!dev.skip_reason().empty()) GTEST_SKIP() << dev.skip_reason();
  Backend& be = *dev.get();
  Net net(be, Dims{kH, kW, kC}, kClasses);
  build_bn_net(net, {}, 4);
  const size_t n = net.num_params(), nb = net.num_buffers();
  SwaAverage swa(be, n, nb);
  EXPECT_EQ(swa.models(), 0);
  EXPECT_EQ(download(be, swa.params(), n), std::vector<float>(n, 0.f));
  std::vector<double> sum(n, 0.0);
  float* d_w = static_cast<float*>(be.alloc(sizeof(float) * n));
  constexpr int kModels = 7;
  for (int t = 0; t < kModels; ++t) {
    const std::vector<float> w = random_vec(n, 300 + t, -2.f, 3.f);
    be.upload(d_w, w.data(), sizeof(float) * n);
    swa.update(d_w);
    for (size_t i = 0; i < n; ++i) sum[i] += w[i];
    if (t == 0) {
      EXPECT_EQ(download(be, swa.params(), n), w) << "the first model is copied";
    }
  }
  be.release(d_w);
  for (double& s : sum) s /= kModels;
  EXPECT_EQ(swa.models(), kModels);
  EXPECT_FALSE(swa.bn_current());
  EXPECT_TRUE(all_close(download(be, swa.params(), n), sum, 1e-6, 1e-5, "average of 7 models"));
  // Swapping twice restores the net's parameters and buffers and the average, bit for bit.
  const std::vector<float> w0 = download(be, net.params(), n), b0 = download(be, net.buffers(), nb);
  const std::vector<float> a0 = download(be, swa.params(), n), s0 = download(be, swa.buffers(), nb);
  swa.swap_with(net);
  EXPECT_EQ(download(be, net.params(), n), a0);
  EXPECT_EQ(download(be, net.buffers(), nb), s0);
  swa.swap_with(net);
  EXPECT_EQ(download(be, net.params(), n), w0);
  EXPECT_EQ(download(be, net.buffers(), nb), b0);
  EXPECT_EQ(download(be, swa.params(), n), a0);
}

// Sample s of pass batch i: channel c centred at c - 1 + i/4, so that batches differ in mean and spread.
std::vector<float> sample(int64_t i, int s) {
  std::vector<float> v = random_vec(kH * kW * kC, 1000 + 37 * i + s);
  for (size_t k = 0; k < v.size(); ++k) v[k] = v[k] * (1.f + 0.5f * (k % kC)) + (k % kC) - 1.f + 0.25f * i;
  return v;
}

// Mean and unbiased variance of input channel c over samples [s0, s0 + per) of pass batch i.
void stats_of(int64_t i, int s0, int per, int c, double& mean, double& var) {
  std::vector<double> xs;
  for (int s = s0; s < s0 + per; ++s) {
    const std::vector<float> v = sample(i, s);
    for (size_t k = c; k < v.size(); k += kC) xs.push_back(v[k]);
  }
  mean = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  var = 0;
  for (double x : xs) var += (x - mean) * (x - mean);
  var /= static_cast<double>(xs.size() - 1);
}

// update_bn computed directly: the mean over every statistic of `per` samples of each batch's mean and
// unbiased variance of input channel c.
void direct_stats(int64_t batches, int local, int per, std::vector<double>& mean, std::vector<double>& var) {
  mean.assign(kC, 0.0);
  var.assign(kC, 0.0);
  const double count = static_cast<double>(batches * (local / per));
  for (int64_t i = 0; i < batches; ++i)
    for (int g = 0; g < local / per; ++g)
      for (int c = 0; c < kC; ++c) {
        double m, v;
        stats_of(i, g * per, per, c, m, v);
        mean[c] += m / count;
        var[c] += v / count;
      }
}

struct BnCase {
  int group, accum;
};

// Recomputes over 5 batches of 8 samples; `per` is the size of what one statistic covers.
void check_recompute(Backend& be, const BnCase& k) {
  constexpr int kLocal = 8;
  constexpr int64_t kBatches = 5;
  BnOptions bn;
  bn.group = k.group;
  Net net(be, Dims{kH, kW, kC}, kClasses);
  build_bn_net(net, bn, kLocal / k.accum);
  StepBuffers buf = alloc_step_buffers(be, net, kLocal);
  be.fill(net.buffers(), net.num_buffers(), 7.f);  // whatever was there does not count
  const std::vector<float> w0 = download(be, static_cast<const Net&>(net).params(), net.num_params());
  std::vector<int64_t> loaded;
  BnPass p;
  p.batches = kBatches;
  p.local_batch = kLocal;
  p.accum_steps = k.accum;
  recompute_bn_statistics(be, net, p, buf, [&](int64_t i) {
    loaded.push_back(i);
    std::vector<float> x;
    for (int s = 0; s < kLocal; ++s) {
      const std::vector<float> v = sample(i, s);
      x.insert(x.end(), v.begin(), v.end());
    }
    be.upload(buf.x, x.data(), sizeof(float) * x.size());
  });
  EXPECT_EQ(loaded, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  std::vector<double> mean, var;
  const int per = k.group > 0 ? k.group : kLocal / k.accum;
  direct_stats(kBatches, kLocal, per, mean, var);
  const std::string what = "group " + std::to_string(k.group) + ", accum " + std::to_string(k.accum);
  const std::vector<float> got = download(be, net.buffers(), net.num_buffers());
  const size_t rm = buffer(net, "bn1.running_mean").offset, rv = buffer(net, "bn1.running_var").offset;
  EXPECT_TRUE(all_close(std::vector<float>(got.begin() + rm, got.begin() + rm + kC), mean, 1e-5, 1e-5,
                        "bn1 running mean, " + what));
  EXPECT_TRUE(all_close(std::vector<float>(got.begin() + rv, got.begin() + rv + kC), var, 1e-5, 1e-5,
                        "bn1 running var, " + what));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(std::isfinite(got[i]) && got[i] != 7.f) << what << " " << i;
  EXPECT_EQ(download(be, static_cast<const Net&>(net).params(), net.num_params()), w0) << "weights changed";
  // Afterwards the configured momentum again: a training forward of batch 4's first micro-batch (still in
  // buf.x) moves bn1's mean by 0.1 towards each of its statistics.
  net.set_batch({});
  net.forward(buf.x, kLocal / k.accum, true);
  double want = got[rm];
  for (int s0 = 0; s0 < kLocal / k.accum; s0 += per) {
    double m, v;
    stats_of(kBatches - 1, s0, per, 0, m, v);
    want = 0.9 * want + 0.1 * m;
  }
  EXPECT_NEAR(download(be, net.buffers() + rm, 1)[0], want, 1e-5) << "momentum after the pass, " << what;
  free_step_buffers(be, buf);
}

TEST_P(SwaTest, RecomputedBatchNormStatisticsAreTheMeanOverBatches) {
  TargetBackend dev(GetParam());
  if (!dev.skip_reason().empty()) GTEST_SKIP() << dev.skip_reason();
  for (const BnCase& k : {BnCase{0, 1}, BnCase{0, 2}, BnCase{2, 1}, BnCase{4, 2}}) check_recompute(*dev.get(), k);
}

INSTANTIATE_TEST_SUITE_P(Targets, SwaTest,
                         ::testing::Values(BackendTarget{"cpu", TargetKind::kCpu, 1, 0},
                                           BackendTarget{"emu", TargetKind::kEmu, 1, 0},
                                           BackendTarget{"cuda", TargetKind::kGpu}),
                         target_param_name);

// torch.optim.swa_utils.SWALR.get_lr (torch 1.13 to 2.5), transcribed: each step() reconstructs the rate it
// started from out of the group's current rate and the previous factor, then blends towards swa_lr.
class TorchSwalr {
 public:
  TorchSwalr(double swa_lr, int anneal_epochs, bool cos) : swa_lr_(swa_lr), k_(anneal_epochs), cos_(cos) {}
  double step(double lr) {
    int64_t step = step_count_++;
    if (k_ == 0) step = std::max<int64_t>(1, step);
    const double prev_alpha = anneal(std::clamp(static_cast<double>(step - 1) / std::max(1, k_), 0.0, 1.0));
    const double prev_lr = prev_alpha == 1 ? swa_lr_ : (lr - prev_alpha * swa_lr_) / (1 - prev_alpha);
    const double alpha = anneal(std::clamp(static_cast<double>(step) / std::max(1, k_), 0.0, 1.0));
    return swa_lr_ * alpha + prev_lr * (1 - alpha);
  }

 private:
  double anneal(double t) const { return cos_ ? (1 - std::cos(M_PI * t)) / 2 : t; }
  double swa_lr_;
  int k_;
  bool cos_;
  int64_t step_count_ = 0;
};

// The recipe: a main schedule stepped per epoch (its rate at the epoch's first step here) until the start epoch,
// SWALR (made at the start, so its first step() is the constructor's) from it on; the rate each epoch trains at.
std::vector<double> torch_recipe(const LrSchedule& s, int start_epoch, int epochs) {
  TorchSwalr swalr(s.swa.swa_lr, static_cast<int>(s.swa.anneal_epochs), s.swa.cosine);
  swalr.step(s.scheduled(0));  // the constructor's; the main scheduler's first value overrides what it set
  double lr = s.scheduled(0);
  std::vector<double> out;
  for (int e = 0; e < epochs; ++e) {
    out.push_back(lr);
    lr = e >= start_epoch ? swalr.step(lr) : s.scheduled((e + 1) * s.swa.steps_per_epoch);
  }
  return out;
}

TEST(SwaLr, FollowsTorchsSwalrInItsRecipe) {
  constexpr int kSpe = 7, kEpochs = 16, kStart = 3;
  for (int anneal : {0, 1, 3, 10})
    for (bool cos : {true, false}) {
      LrSchedule s;
      s.peak = 0.2;
      s.min_lr = 0.01;
      s.warmup_steps = 5;
      s.total_steps = kSpe * kEpochs;
      s.swa = {kStart * kSpe, kSpe, 0.03, anneal, cos};
      const std::vector<double> want = torch_recipe(s, kStart, kEpochs);
      for (int64_t step = 0; step < s.total_steps; ++step) {
        const int64_t e = step / kSpe;
        if (e < kStart) {
          EXPECT_EQ(s.at(step), s.scheduled(step)) << "before SWA, step " << step;
          continue;
        }
        EXPECT_NEAR(s.at(step), want[e], 1e-12 * want[e])
            << "anneal_epochs " << anneal << (cos ? " cos" : " linear") << ", epoch " << e << " step " << step;
      }
      // From the anneal_epochs-th SWA epoch on: swa_lr itself; the first SWA epoch: the schedule's rate.
      EXPECT_EQ(s.at(kStart * kSpe), s.scheduled(kStart * kSpe));
      EXPECT_NEAR(s.at((kStart + std::max(anneal, 1)) * kSpe), 0.03, 1e-15);
    }
}

ParseResult parse(std::vector<std::string> args, Config& c) {
  args.insert(args.begin(), "cnntrain");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  return parse_config(static_cast<int>(argv.size()), argv.data(), c);
}

TEST(SwaOptions, AreCheckedAndRoundTrip) {
  Config c;
  parse({"--data.train", "x.h5", "--train.epochs", "8", "--train.swa_start_epoch", "6", "--train.swa_lr", "0.05",
         "--train.swa_anneal", "linear", "--train.swa_anneal_epochs", "2"}, c);
  EXPECT_EQ(c.train.swa_start_epoch, 6);
  EXPECT_NE(config_to_ini(c).find("swa_anneal = linear"), std::string::npos);
  Config d;
  expect_throws([&] { parse({"--data.train", "x.h5", "--train.swa_start_epoch", "2"}, d); }, kExitUsage,
                "needs --train.swa_lr");
  expect_throws([&] { parse({"--data.train", "x.h5", "--train.epochs", "4", "--train.swa_start_epoch", "4",
                             "--train.swa_lr", "0.1"}, d); }, kExitUsage, "--train.epochs is 4");
  expect_throws([&] { parse({"--data.train", "x.h5", "--train.swa_anneal", "exp"}, d); }, kExitUsage,
                "train.swa_anneal");
}

}  // namespace
}  // namespace cnn::test
