#include "io/mix.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace cnn {

namespace {

const uint64_t kMixStream = 0x4d4958ull;  // "MIX": apart from the other augmentation streams (io/augment.cpp)

// Uniform in (0, 1] with 53 random bits: never 0, so its logarithm is finite.
double unit(CounterRng& rng) { return static_cast<double>((rng.next() >> 11) + 1) * 0x1.0p-53; }

// A standard normal variate (Box-Muller, the cosine branch).
double normal(CounterRng& rng) {
  const double r = std::sqrt(-2.0 * std::log(unit(rng)));
  return r * std::cos(2.0 * M_PI * unit(rng));
}

// log of a Gamma(alpha, 1) variate. alpha >= 1: Marsaglia and Tsang (2000); alpha < 1: Gamma(alpha + 1)
// times U^(1/alpha), whose logarithm stays finite where the variate itself would underflow to 0.
double log_gamma_variate(CounterRng& rng, double alpha) {
  if (alpha < 1.0) return log_gamma_variate(rng, alpha + 1.0) + std::log(unit(rng)) / alpha;
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(rng), v1 = 1.0 + c * x;
    if (v1 <= 0.0) continue;
    const double v = v1 * v1 * v1;
    if (std::log(unit(rng)) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d) + std::log(v);
  }
}

// timm's rand_bbox + correct_lam: the box of a cutmix with Beta draw lam, and the lam its area leaves.
void cutmix_box(CounterRng& rng, double lam, int h, int w, MixDraw* d) {
  const double ratio = std::sqrt(1.0 - lam);
  const int cut_h = static_cast<int>(h * ratio), cut_w = static_cast<int>(w * ratio);
  const int cy = static_cast<int>(rng.below(h)), cx = static_cast<int>(rng.below(w));
  const int y0 = std::clamp(cy - cut_h / 2, 0, h), y1 = std::clamp(cy + cut_h / 2, 0, h);
  const int x0 = std::clamp(cx - cut_w / 2, 0, w), x1 = std::clamp(cx + cut_w / 2, 0, w);
  if (y1 <= y0 || x1 <= x0) return;  // an empty box mixes nothing: lam stays 1
  d->box_y = y0;
  d->box_x = x0;
  d->box_h = y1 - y0;
  d->box_w = x1 - x0;
  d->lam = static_cast<float>(1.0 - static_cast<double>(d->box_h) * d->box_w / (static_cast<double>(h) * w));
}

}  // namespace

double sample_beta(CounterRng& rng, double alpha) {
  const double l1 = log_gamma_variate(rng, alpha), l2 = log_gamma_variate(rng, alpha);
  return 1.0 / (1.0 + std::exp(l2 - l1));  // G1 / (G1 + G2)
}

MixDraw draw_mix(const MixConfig& m, int64_t epoch, int64_t id, int h, int w, int32_t partner_label) {
  CounterRng rng(m.seed ^ kMixStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  MixDraw d;
  d.partner_label = partner_label;
  // Both uniforms are drawn whatever the settings, so each later draw keeps its place in the stream.
  const double u_apply = unit(rng), u_switch = unit(rng);
  if (!m.on() || u_apply > m.mix_prob) return d;
  const bool cut = m.cutmix > 0.0 && (m.mixup <= 0.0 || u_switch <= m.switch_prob);
  const double lam = sample_beta(rng, cut ? m.cutmix : m.mixup);
  if (cut)
    cutmix_box(rng, lam, h, w, &d);
  else
    d.lam = static_cast<float>(lam);
  return d;
}

std::vector<MixDraw> draw_mix_batch(const MixConfig& m, int64_t epoch, const std::vector<int64_t>& ids,
                                    const std::vector<int32_t>& labels, int h, int w) {
  const size_t n = ids.size();
  CNN_CHECK(n % 2 == 0 && labels.size() == n, "mixing a local batch of %zu samples (%zu labels): it must be even",
            n, labels.size());
  std::vector<MixDraw> draws(n);
  for (size_t i = 0; i < n; ++i) draws[i] = draw_mix(m, epoch, ids[i], h, w, labels[i ^ 1]);
  return draws;
}

void check_mix_batch(const MixConfig& m, int64_t global_batch, int world) {
  if (!m.on() || (global_batch % world == 0 && (global_batch / world) % 2 == 0)) return;
  raise(kExitUsage,
        "options --augment.mixup/--augment.cutmix: each sample is mixed with its pair partner (positions 2k, 2k+1 "
        "of the global batch) on the same rank, so the per-rank batch must be even, but --train.batch %lld on %d "
        "ranks gives %lld; choose --train.batch a multiple of %d",
        (long long)global_batch, world, (long long)(global_batch / world), 2 * world);
}

}  // namespace cnn
