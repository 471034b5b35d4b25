// Mixup and cutmix (io/mix.h, kernels/mix_images.h): the Beta sampler's moments and distribution, the draws'
// keying and kinds, the pixel op against a direct computation, the loader's host output and the device path
// (InputPath on the emulator) against the same computation, draws independent of the rank count, the
// refusal of an odd per-rank batch, and the training step's use of the soft-target loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/loader.h"
#include "io/mix.h"
#include "io/synthetic_dataset.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "src/base/error.h"
#include "src/model/layers.h"
#include "src/train/input_path.h"
#include "src/train/optimizer.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

struct Moments {
  double mean = 0, var = 0, m4 = 0;  // central moments 2 and 4
};

Moments beta_moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= v.size();
  for (double x : v) {
    const double d = (x - m.mean) * (x - m.mean);
    m.var += d;
    m.m4 += d * d;
  }
  m.var /= v.size();
  m.m4 /= v.size();
  return m;
}

std::vector<double> beta_draws(double alpha, int n) {
  CounterRng rng(99, static_cast<uint64_t>(alpha * 1000));
  std::vector<double> v(n);
  for (double& x : v) x = sample_beta(rng, alpha);
  return v;
}

// Beta(a, a): mean 1/2, variance 1/(4(2a+1)), fourth central moment 3/(16(2a+1)(2a+3)); the tolerances are
// five standard errors of 200000 draws.
TEST(Mix, BetaSamplerMoments) {
  const int n = 200000;
  for (double a : {0.1, 0.2, 0.5, 1.0, 2.0, 8.0}) {
    const std::vector<double> v = beta_draws(a, n);
    for (double x : v) ASSERT_TRUE(x >= 0.0 && x <= 1.0 && std::isfinite(x)) << "alpha " << a << ": " << x;
    const Moments m = beta_moments(v);
    const double var = 1.0 / (4 * (2 * a + 1)), m4 = 3.0 / (16 * (2 * a + 1) * (2 * a + 3));
    EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(var / n)) << "alpha " << a;
    EXPECT_NEAR(m.var, var, 5 * std::sqrt((m4 - var * var) / n)) << "alpha " << a;
    EXPECT_NEAR(m.m4, m4, 0.02 * m4) << "alpha " << a;
  }
}

// Kolmogorov-Smirnov distance to the exact CDF: Beta(1,1) is uniform, Beta(1/2,1/2) the arcsine law.
TEST(Mix, BetaSamplerDistribution) {
  const int n = 200000;
  const double pi = std::acos(-1.0);
  for (double a : {1.0, 0.5}) {
    std::vector<double> v = beta_draws(a, n);
    std::sort(v.begin(), v.end());
    double d = 0;
    for (int i = 0; i < n; ++i) {
      const double cdf = a == 1.0 ? v[i] : 2.0 / pi * std::asin(std::sqrt(v[i]));
      d = std::max({d, std::fabs(cdf - static_cast<double>(i) / n), std::fabs(cdf - (i + 1.0) / n)});
    }
    EXPECT_LT(d, 1.95 / std::sqrt(n)) << "alpha " << a << ": KS distance (p = 0.001 critical value 1.95/sqrt(n))";
  }
}

// Keyed by (seed, epoch, id); mix_prob and switch_prob choose as often as they say; cutmix's lam is what its
// box leaves of the image.
TEST(Mix, DrawsKeyedAndOfTheRightKind) {
  MixConfig m;
  m.mixup = 0.4, m.cutmix = 1.0, m.mix_prob = 0.8, m.switch_prob = 0.3, m.seed = 5;
  const int h = 12, w = 9, count = 20000;
  int none = 0, cut = 0, blend = 0;
  for (int id = 0; id < count; ++id) {
    const MixDraw d = draw_mix(m, 3, id, h, w, 7);
    const MixDraw again = draw_mix(m, 3, id, h, w, 7);
    ASSERT_EQ(std::memcmp(&d, &again, sizeof d), 0);
    EXPECT_EQ(d.partner_label, 7);
    if (d.box_h > 0) {
      ++cut;
      ASSERT_TRUE(d.box_y >= 0 && d.box_x >= 0 && d.box_y + d.box_h <= h && d.box_x + d.box_w <= w && d.box_w > 0);
      ASSERT_EQ(d.lam, static_cast<float>(1.0 - static_cast<double>(d.box_h) * d.box_w / (h * w)));
    } else if (d.lam < 1.f) {
      ++blend;
      ASSERT_GT(d.lam, 0.f);
    } else {
      ++none;
    }
  }
  // A cutmix whose box rounds to nothing counts as none; with Beta(1,1) that takes lam > 1 - (2/9)^2 or so.
  EXPECT_NEAR(static_cast<double>(cut + none) / count, 0.2 + 0.8 * 0.3, 0.02);
  EXPECT_NEAR(static_cast<double>(blend) / count, 0.8 * 0.7, 0.02);
  EXPECT_GT(cut, 0.2 * count);
  int differ = 0;
  for (int id = 0; id < 100; ++id) differ += draw_mix(m, 3, id, h, w, 7).lam != draw_mix(m, 4, id, h, w, 7).lam;
  EXPECT_GT(differ, 60);  // another epoch, other draws
  m.mix_prob = 0.0;
  EXPECT_EQ(draw_mix(m, 3, 1, h, w, 7).lam, 1.f);
}

std::vector<float> random_images(size_t count, uint64_t seed) {
  CounterRng rng(seed, 1);
  std::vector<float> v(count);
  for (float& x : v) x = 2.f * rng.uniform() - 1.f;
  return v;
}

// What sample i of x [n, h, w, c] becomes, from the definition, in double.
double expected_mixed(const std::vector<float>& x, const std::vector<MixDraw>& d, int h, int w, int c, int i, int y,
                      int xx, int ch) {
  const size_t image = static_cast<size_t>(h) * w * c, e = (static_cast<size_t>(y) * w + xx) * c + ch;
  const double self = x[i * image + e], partner = x[(i ^ 1) * image + e];
  const MixDraw& m = d[i];
  if (m.box_h > 0)
    return y >= m.box_y && y < m.box_y + m.box_h && xx >= m.box_x && xx < m.box_x + m.box_w ? partner : self;
  return m.lam * self + (1.0 - m.lam) * partner;
}

void expect_mixed(const std::vector<float>& got, const std::vector<float>& orig, const std::vector<MixDraw>& d, int h,
                  int w, int c, double tol) {
  const int n = static_cast<int>(d.size());
  int bad = 0;
  for (int i = 0; i < n; ++i)
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int ch = 0; ch < c; ++ch) {
          const double want = expected_mixed(orig, d, h, w, c, i, y, xx, ch);
          const float g = got[((static_cast<size_t>(i) * h + y) * w + xx) * c + ch];
          if (std::fabs(g - want) > tol * (1 + std::fabs(want)) && bad++ < 5)
            ADD_FAILURE() << "sample " << i << " (" << y << ", " << xx << ", " << ch << "): " << g << " vs " << want;
        }
  EXPECT_EQ(bad, 0);
}

TEST(Mix, ImagesAgainstDirectComputation) {
  const int n = 6, h = 5, w = 7, c = 3;
  std::vector<MixDraw> d(n);
  d[0].lam = 0.3f;                                                      // mixup
  d[2].box_y = 1, d[2].box_x = 2, d[2].box_h = 3, d[2].box_w = 4;       // cutmix inside
  d[3].box_y = 0, d[3].box_x = 0, d[3].box_h = h, d[3].box_w = w;       // the whole partner
  d[4].lam = 0.9f;                                                      // mixup both ways
  d[5].lam = 0.05f;
  const std::vector<float> orig = random_images(static_cast<size_t>(n) * h * w * c, 4);
  std::vector<float> x = orig;
  mix_images_cpu(n, h, w, c, d.data(), x.data());
  expect_mixed(x, orig, d, h, w, c, 1e-6);
  const size_t image = static_cast<size_t>(h) * w * c;
  EXPECT_TRUE(std::equal(x.begin() + image, x.begin() + 2 * image, orig.begin() + image));  // lam 1: untouched
  EXPECT_TRUE(std::equal(x.begin() + 3 * image, x.begin() + 4 * image, orig.begin() + 2 * image));  // all partner
}

// The network input and the loss's draws a backend's InputPath makes of the first mixed batch (with the other
// augmentations on): through the loader's float images or through upload_images + mix_images.
struct MixedInput {
  std::vector<float> x;
  std::vector<MixDraw> draws;
};

AugmentConfig mixing_augment() {
  AugmentConfig aug;
  aug.crop_pad = 2, aug.flip = true, aug.erase_p = 0.5f, aug.seed = 17;
  aug.mix.mixup = 0.5, aug.mix.cutmix = 1.0, aug.mix.mix_prob = 0.9, aug.mix.seed = 17;
  return aug;
}

MixedInput mixed_input(Backend& be, Dataset& ds, const SyntheticSpec& spec) {
  const size_t n = 16, pixels = n * spec.height * spec.width * spec.channels;
  StepBuffers buf;
  buf.x = static_cast<float*>(be.alloc(sizeof(float) * pixels));
  buf.labels = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * n));
  buf.ids = static_cast<int64_t*>(be.alloc(sizeof(int64_t) * n));
  buf.mix = static_cast<MixDraw*>(be.alloc(sizeof(MixDraw) * n));
  InputPath in(be, buf, ds.info());
  Sampler sampler(spec.count, n, 23);
  Loader loader(ds, sampler, 0, 1, 2, 0, 0, 1, mixing_augment(), in.loader_output());
  in.upload(loader.next(nullptr));
  MixedInput r{std::vector<float>(pixels), std::vector<MixDraw>(n)};
  be.download(r.x.data(), buf.x, sizeof(float) * pixels);
  be.download(r.draws.data(), buf.mix, sizeof(MixDraw) * n);
  for (void* p : {static_cast<void*>(buf.x), static_cast<void*>(buf.labels), static_cast<void*>(buf.ids),
                  static_cast<void*>(buf.mix)})
    be.release(p);
  return r;
}

// The host loader's batch is the unmixed batch mixed as its draws say; the emulator's device path
// (upload_images, then mix_images) gives the same input and the same draws.
TEST(Mix, LoaderAndDevicePathMixAsDrawn) {
  SyntheticSpec spec;
  spec.count = 64, spec.height = 9, spec.width = 8, spec.channels = 3, spec.classes = 4;
  auto ds = make_synthetic_dataset(spec, 3);
  AugmentConfig plain = mixing_augment();
  plain.mix = MixConfig{};
  Sampler sampler(spec.count, 16, 23);
  Loader mixed(*ds, sampler, 0, 1, 2, 0, 0, 1, mixing_augment(), LoaderOutput::kHost);
  Loader unmixed(*ds, sampler, 0, 1, 2, 0, 0, 1, plain, LoaderOutput::kHost);
  const Batch& a = mixed.next(nullptr);
  const Batch& b = unmixed.next(nullptr);
  ASSERT_EQ(a.mix.size(), 16u);
  ASSERT_TRUE(b.mix.empty());
  for (int i = 0; i < a.n; ++i) EXPECT_EQ(a.mix[i].partner_label, a.labels[i ^ 1]);
  int kinds[3] = {0, 0, 0};
  for (const MixDraw& d : a.mix) ++kinds[d.box_h > 0 ? 0 : d.lam < 1.f ? 1 : 2];
  EXPECT_GT(kinds[0], 0);  // the seed gives cutmix and mixup samples
  EXPECT_GT(kinds[1], 0);
  expect_mixed(a.images, b.images, a.mix, spec.height, spec.width, spec.channels, 1e-6);

  const auto cpu = make_cpu_backend(1, CpuKernels::kReference);
  const auto emu = make_emu_backend();
  const MixedInput host = mixed_input(*cpu, *ds, spec), device = mixed_input(*emu, *ds, spec);
  ASSERT_EQ(host.x, a.images);
  ASSERT_EQ(std::memcmp(host.draws.data(), a.mix.data(), sizeof(MixDraw) * a.n), 0);
  ASSERT_EQ(std::memcmp(device.draws.data(), a.mix.data(), sizeof(MixDraw) * a.n), 0);
  for (size_t i = 0; i < host.x.size(); ++i)
    ASSERT_NEAR(host.x[i], device.x[i], 1e-5f * (1 + std::fabs(host.x[i]))) << "element " << i;
}

// A rank's draws are the matching slice of one rank's: pairs never straddle ranks when the local batch is even.
TEST(Mix, DrawsDoNotDependOnTheRankCount) {
  MixConfig m;
  m.mixup = 0.2, m.cutmix = 1.0, m.seed = 8;
  Sampler sampler(300, 32, 4);
  auto labels_of = [](const std::vector<int64_t>& ids) {
    std::vector<int32_t> l;
    for (int64_t id : ids) l.push_back(static_cast<int32_t>(id * 7 % 10));
    return l;
  };
  for (int64_t step : {0, 5}) {
    const std::vector<int64_t> all = sampler.rank_slice(1, step, 0, 1);
    const std::vector<MixDraw> one = draw_mix_batch(m, 1, all, labels_of(all), 10, 10);
    for (int world : {2, 4, 16}) {
      std::vector<MixDraw> joined;
      for (int r = 0; r < world; ++r) {
        const std::vector<int64_t> ids = sampler.rank_slice(1, step, r, world);
        const std::vector<MixDraw> part = draw_mix_batch(m, 1, ids, labels_of(ids), 10, 10);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      ASSERT_EQ(std::memcmp(joined.data(), one.data(), sizeof(MixDraw) * one.size()), 0) << world << " ranks";
    }
  }
}

TEST(Mix, OddPerRankBatchRefused) {
  MixConfig m;
  m.cutmix = 1.0;
  for (auto [batch, world] : {std::pair<int64_t, int>{6, 2}, {16, 16}, {9, 1}}) {
    try {
      check_mix_batch(m, batch, world);
      ADD_FAILURE() << "batch " << batch << " on " << world << " ranks accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitUsage);
      for (const char* s : {"--augment.mixup", "--augment.cutmix", "--train.batch"})
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  }
  check_mix_batch(m, 16, 8);
  check_mix_batch(MixConfig{}, 6, 2);  // no mixing: nothing to pair
}

// The weights after one plain SGD step (no momentum, no decay) on a fixed batch: with `mix`, each row's target
// is lam of its label's and 1 - lam of mix[i].partner_label's; in `accum` micro-batches.
std::vector<float> one_step(const std::vector<int32_t>& labels, const std::vector<MixDraw>* mix, int accum) {
  const int n = static_cast<int>(labels.size());
  auto be = make_cpu_backend(1, CpuKernels::kReference);
  Net net(*be, Dims{6, 6, 2}, 4);
  net.add(make_conv2d("conv1", 3, {3, 1, 1, true}));
  net.add(make_relu("relu1"));
  net.add(make_flatten("flat"));
  net.add(make_linear("fc", 4));
  net.build(n / accum, 9);
  OptimizerConfig oc;
  oc.momentum = 0, oc.weight_decay = 0;
  auto opt = make_optimizer(oc, *be, net);
  StepBuffers buf = alloc_step_buffers(*be, net, n);
  const std::vector<float> x = test::random_vec(6 * 6 * 2 * n, 31);
  be->upload(buf.x, x.data(), x.size() * sizeof(float));
  be->upload(buf.labels, labels.data(), labels.size() * sizeof(int32_t));
  StepConfig sc;
  sc.global_batch = n;
  sc.accum_steps = accum;
  sc.label_smoothing = 0.1f;
  if (mix) {
    be->upload(buf.mix, mix->data(), mix->size() * sizeof(MixDraw));
    sc.mix = buf.mix;
  }
  StepStats st;
  train_step(*be, net, *opt, nullptr, buf, n, sc, 0.5, st);
  free_step_buffers(*be, buf);
  return std::vector<float>(net.params(), net.params() + net.num_params());
}

// The loss is linear in the target, so one SGD step on the mixed target lands at lam of the step towards the
// own labels plus 1 - lam of the step towards the partners' (one lam for all rows here); also in micro-batches,
// where each takes its own rows' draws.
TEST(Mix, StepUsesTheSoftTargetLoss) {
  const int n = 6;
  const std::vector<int32_t> own = {0, 1, 2, 3, 0, 1}, other = {1, 0, 3, 2, 1, 3};
  std::vector<MixDraw> mix(n);
  for (int i = 0; i < n; ++i) mix[i].lam = 0.25f, mix[i].partner_label = other[i];
  const std::vector<float> a = one_step(own, nullptr, 1), b = one_step(other, nullptr, 1);
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = 0.25f * a[i] + 0.75f * b[i];
  EXPECT_TRUE(test::all_close(one_step(own, &mix, 1), want, 1e-6, 1e-5, "mixed step"));
  EXPECT_TRUE(test::all_close(one_step(own, &mix, 3), want, 1e-6, 1e-5, "mixed step in 3 micro-batches"));
  EXPECT_FALSE(test::all_close(a, want, 1e-6, 1e-5, "the own labels' step (expected to differ)"));
}

}  // namespace
}  // namespace cnn
