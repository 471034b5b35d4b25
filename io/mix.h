// Mixup (Zhang et al. 2018) and cutmix (Yun et al. 2019) draws, as timm's Mixup in its per-sample ("elem")
// mode with correct_lam: each training sample is mixed with its partner, the other sample of its pair (2k,
// 2k+1) of positions in the global batch, with its own lam ~ Beta(alpha, alpha) (kernels/mix_images.h does
// the pixel work, Backend::softmax_xent_mix_totals the loss). Every draw is a function of (seed, epoch, global
// sample id), never of the rank; and a pair is always on one rank when the local batch global_batch / ranks is
// even (rank r's slice starts at position r * local), which check_mix_batch demands. So a mixed run gives the
// same batches on any rank count that passes the check.
//
// Per sample, in this order: with probability 1 - mix_prob nothing (lam = 1); else, with both alphas set,
// cutmix with probability switch_prob and mixup otherwise (one of them alone: that one); lam from Beta(alpha,
// alpha) of the chosen kind; for cutmix a box of (int(h*sqrt(1-lam)), int(w*sqrt(1-lam))) centred at a
// uniform pixel, clipped to the image, and lam corrected to 1 - box area / (h*w) (timm's rand_bbox).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/mix_images.h"
#include "kernels/rng.h"

namespace cnn {

struct MixConfig {
  double mixup = 0.0, cutmix = 0.0;  // Beta alphas; 0: off
  double mix_prob = 1.0;             // probability that a sample is mixed at all
  double switch_prob = 0.5;          // with both on: probability of cutmix
  uint64_t seed = 0;
  bool on() const { return (mixup > 0.0 || cutmix > 0.0) && mix_prob > 0.0; }
};

// A Beta(alpha, alpha) variate from the stream (two Gamma(alpha) draws, Marsaglia-Tsang, in log space so
// that small alphas do not underflow).
double sample_beta(CounterRng& rng, double alpha);

// Sample `id`'s draw in epoch `epoch` for an h x w image; partner_label: its partner's label.
MixDraw draw_mix(const MixConfig& m, int64_t epoch, int64_t id, int h, int w, int32_t partner_label);

// The draws of a local batch in position order (ids, labels: [n], n even): partner of i is i ^ 1.
std::vector<MixDraw> draw_mix_batch(const MixConfig& m, int64_t epoch, const std::vector<int64_t>& ids,
                                    const std::vector<int32_t>& labels, int h, int w);

// Exit 2 (naming the options) unless every rank's share of the global batch is even, so that no pair straddles
// two ranks. Nothing to check when mixing is off.
void check_mix_batch(const MixConfig& m, int64_t global_batch, int world);

}  // namespace cnn
