#include "kernels/image_prep.h"

#include <vector>

namespace cnn {

namespace {

// The mean of brightened_grey over one image, summed in double in row order and rounded once.
float mean_grey(const uint8_t* img, int h, int w, int c, const ImageAug& a) {
  double sum = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) sum += image_prep::brightened_grey(img, h, w, c, a, y, x);
  return static_cast<float>(sum / (static_cast<double>(h) * w));
}

}  // namespace

void prepare_images_cpu(const ImageBatch& b, float* x) {
  std::vector<float> scale(b.c), shift(b.c);
  for (int ch = 0; ch < b.c; ++ch) {
    scale[ch] = 1.0f / b.std[ch];
    shift[ch] = -b.mean[ch] / b.std[ch];
  }
  const size_t image = static_cast<size_t>(b.h) * b.w * b.c;
  for (int i = 0; i < b.n; ++i) {
    const ImageAug a = b.aug ? b.aug[i] : ImageAug{};
    const uint8_t* src = b.pixels + i * image;
    const float m = a.contrast != 1.f ? mean_grey(src, b.h, b.w, b.c, a) : 0.f;
    for (int y = 0; y < b.h; ++y)
      for (int xx = 0; xx < b.w; ++xx)
        image_prep::prepare_pixel(src, b.h, b.w, b.c, a, m, scale.data(), shift.data(), y, xx,
                                  x + i * image + (static_cast<size_t>(y) * b.w + xx) * b.c);
  }
}

}  // namespace cnn
