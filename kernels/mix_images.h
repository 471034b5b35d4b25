// Mixup and cutmix of a prepared training batch (after normalisation and random erasing, as timm mixes the
// collated batch), in place. Partners are the pairs (2k, 2k+1) of the batch, so n is even; sample i takes
// from sample i ^ 1 as its MixDraw says (io/mix.h draws it per global sample id):
//   mixup  (box_h == 0): x_i = lam * x_i + (1 - lam) * x_partner, every element (lam == 1: x_i unchanged);
//   cutmix (box_h > 0):  x_i inside rows [box_y, box_y + box_h) and columns [box_x, box_x + box_w) replaced by
//                        the partner's pixels there, outside unchanged; lam = 1 - box area / (h * w).
// Both read the partner's values from before the mixing. x: [n, h, w, c] fp32 (the network input).
// The loss then uses lam and the partner's label (Backend::softmax_xent_mix_totals, kernels/loss.h).
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace cnn {

// How one sample was mixed with its partner: the pixel op above and the loss's soft target.
struct MixDraw {
  float lam = 1.f;               // the weight of the sample's own label (and image, for mixup)
  int32_t partner_label = 0;     // the label of sample i ^ 1
  int32_t box_y = 0, box_x = 0;  // cutmix box (box_h == 0: mixup, or nothing when lam == 1)
  int32_t box_h = 0, box_w = 0;
};

// x: host [n, h, w, c], n even; draws: [n].
void mix_images_cpu(int n, int h, int w, int c, const MixDraw* draws, float* x);

namespace mix_images {

// Element (y, x) of sample i after the mixing, from its own value and its partner's. Shared by the reference
// and the CUDA kernel, so both compute the same bits.
CNN_HD float mixed(const MixDraw& d, float self, float partner, int y, int x) {
  if (d.box_h > 0)
    return y >= d.box_y && y < d.box_y + d.box_h && x >= d.box_x && x < d.box_x + d.box_w ? partner : self;
  return d.lam == 1.f ? self : d.lam * self + (1.f - d.lam) * partner;
}

}  // namespace mix_images
}  // namespace cnn
