// Training-set augmentation. Every random choice is a function of (seed, epoch, global sample id), never of the
// rank, the rank count or the position in the batch, so the sequence of global batches is the same for any
// number of ranks. draw_augment makes the draws on the loader thread; the pixel work
// (kernels/image_prep.h: prepare_images_cpu there, Backend::upload_images on a device) applies them in this order:
//   crop_pad p: a random HxW crop of the image zero-padded (pixel value 0) by p on every side;
//   flip: horizontal flip with probability 1/2 (applied after the crop);
//   rotate d: rotation by an angle uniform in [-d, d] degrees (counter-clockwise positive) about the image
//     centre, bilinear, zero outside (torchvision's RandomRotation(d) with bilinear interpolation);
//   brightness, contrast, saturation x: factors uniform in [max(0, 1-x), 1+x] (torchvision's ColorJitter,
//     but always in this order), on the 0..255 image;
//   normalisation with the dataset's mean and std;
//   erase_p: random erasing (Zhong et al. 2017) with probability erase_p: a rectangle of 2-33% of the
//     area and aspect ratio 0.3-3.3 (log-uniform), set to 0 in normalised units (the dataset mean); up to 10
//     tries to fit one, as torchvision does.
#pragma once
#include <cstdint>

#include "io/mix.h"
#include "kernels/backend.h"

namespace cnn {

struct AugmentConfig {
  int crop_pad = 0;
  bool flip = false;
  float rotate = 0.f;  // degrees
  float brightness = 0.f, contrast = 0.f, saturation = 0.f;
  float erase_p = 0.f;
  uint64_t seed = 0;
  MixConfig mix;  // mixup/cutmix of the prepared batch (io/mix.h), after everything above
  bool any() const {
    return crop_pad > 0 || flip || rotate > 0.f || brightness > 0.f || contrast > 0.f || saturation > 0.f ||
           erase_p > 0.f;
  }
};

// Sample `id`'s draws in epoch `epoch`, for an h x w image.
ImageAug draw_augment(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w);

}  // namespace cnn
