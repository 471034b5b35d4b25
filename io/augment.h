// Training-set augmentation, run by the loader thread per sample. Every random choice is a function of
// (seed, epoch, global sample id), never of the rank, the rank count or the position in the batch, so the
// sequence of global batches is the same for any number of ranks.
//   crop_pad p: a random HxW crop of the image zero-padded (pixel value 0) by p on every side;
//   flip: horizontal flip with probability 1/2 (applied after the crop);
//   erase_p: random erasing (Zhong et al. 2017) with probability erase_p: a rectangle of 2-33% of the
//     area and aspect ratio 0.3-3.3 (log-uniform), set to 0 in normalised units (the dataset mean); up to 10
//     tries to fit one, as torchvision does.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace cnn {

struct AugmentConfig {
  int crop_pad = 0;
  bool flip = false;
  float erase_p = 0.f;
  uint64_t seed = 0;
  bool geometric() const { return crop_pad > 0 || flip; }
  bool any() const { return geometric() || erase_p > 0.f; }
};

// Crop and flip of one uint8 HWC image: src -> dst (distinct buffers, h*w*c bytes each).
void augment_geometric(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, const uint8_t* src,
                       uint8_t* dst);
// Random erasing of one normalised float HWC image, in place.
void augment_erase(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, float* img);

// The same draws as one record, for the device input path (Backend::upload_images), whose pixel work
// reproduces augment_geometric, normalisation and augment_erase exactly.
ImageAug draw_augment(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w);

}  // namespace cnn
