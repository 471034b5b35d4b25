#include "kernels/image_prep.h"

#include <cstring>
#include <vector>

namespace cnn {

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
    float* dst = x + i * image;
    for (int y = 0; y < b.h; ++y)
      for (int xx = 0; xx < b.w; ++xx) {
        const int sy = y + a.dy, sx = (a.flip ? b.w - 1 - xx : xx) + a.dx;
        const bool in = sy >= 0 && sy < b.h && sx >= 0 && sx < b.w;
        const uint8_t* p = in ? src + (static_cast<size_t>(sy) * b.w + sx) * b.c : nullptr;
        float* out = dst + (static_cast<size_t>(y) * b.w + xx) * b.c;
        for (int ch = 0; ch < b.c; ++ch) out[ch] = (p ? p[ch] : uint8_t{0}) * scale[ch] + shift[ch];
      }
    for (int y = a.erase_y; y < a.erase_y + a.erase_h; ++y)
      std::memset(dst + (static_cast<size_t>(y) * b.w + a.erase_x) * b.c, 0, sizeof(float) * a.erase_w * b.c);
  }
}

}  // namespace cnn
