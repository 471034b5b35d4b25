#include "kernels/mix_images.h"

#include <cstddef>

namespace cnn {

void mix_images_cpu(int n, int h, int w, int c, const MixDraw* draws, float* x) {
  const size_t image = static_cast<size_t>(h) * w * c;
  for (int k = 0; k + 1 < n; k += 2) {
    float* a = x + k * image;
    float* b = a + image;
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int ch = 0; ch < c; ++ch) {
          const size_t e = (static_cast<size_t>(y) * w + xx) * c + ch;
          const float va = a[e], vb = b[e];
          a[e] = mix_images::mixed(draws[k], va, vb, y, xx);
          b[e] = mix_images::mixed(draws[k + 1], vb, va, y, xx);
        }
  }
}

}  // namespace cnn
