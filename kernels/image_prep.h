// The device input path's pixel work (Backend::upload_images): crop with zero padding, horizontal flip,
// per-channel normalisation and random erasing of uint8 NHWC images, with the random draws made on the
// host (io/augment.h). prepare_images_cpu is the reference; it gives bit for bit what the loader's CPU path
// (io/augment.cpp + normalize_images) gives.
#pragma once
#include "kernels/backend.h"

namespace cnn {

// x: [b.n, b.h, b.w, b.c] float. Host pointers.
void prepare_images_cpu(const ImageBatch& b, float* x);

}  // namespace cnn
