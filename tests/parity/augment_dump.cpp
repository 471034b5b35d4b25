// Rotation and colour jitter as cnntrain draws and applies them (io/augment.h, kernels/image_prep.h), written as
// JSON for tests/parity/augment_parity.py, which applies torchvision's rotate/adjust_* with the same drawn
// parameters: for a 3-channel and a 1-channel image, several samples' drawn angle and factors and the image
// after crop-free rotation and jitter in 0..255 units (normalisation with mean 0 and std 1, nothing erased).
// Usage: augment_dump > out.json
#include <cmath>
#include <cstdio>
#include <vector>

#include "io/augment.h"
#include "kernels/image_prep.h"
#include "kernels/rng.h"

namespace cnn {
namespace {

void dump_image(int h, int w, int c, uint64_t seed, bool last) {
  CounterRng rng(seed, 1);
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * c);
  for (auto& p : px) p = static_cast<uint8_t>(rng.next() >> 56);
  AugmentConfig a;
  a.seed = seed;
  a.rotate = 40.f;
  a.brightness = a.contrast = a.saturation = 0.6f;
  const std::vector<float> mean(c, 0.f), std(c, 1.f);
  std::printf("{\"h\": %d, \"w\": %d, \"c\": %d, \"pixels\": [", h, w, c);
  for (size_t i = 0; i < px.size(); ++i) std::printf("%s%d", i ? ", " : "", px[i]);
  std::printf("], \"samples\": [\n");
  const int samples = 6;
  for (int id = 0; id < samples; ++id) {
    const ImageAug g = draw_augment(a, 1, id, h, w);
    ImageBatch b;
    b.n = 1, b.h = h, b.w = w, b.c = c;
    b.pixels = px.data(), b.aug = &g, b.mean = mean.data(), b.std = std.data();
    std::vector<float> out(px.size());
    prepare_images_cpu(b, out.data());
    std::printf("  {\"degrees\": %.9g, \"brightness\": %.9g, \"contrast\": %.9g, \"saturation\": %.9g, \"out\": [",
                std::atan2(static_cast<double>(g.rot_sin), static_cast<double>(g.rot_cos)) * 180 / M_PI,
                g.brightness, g.contrast, g.saturation);
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%.9g", i ? ", " : "", out[i]);
    std::printf("]}%s\n", id + 1 < samples ? "," : "");
  }
  std::printf("]}%s\n", last ? "" : ",");
}

}  // namespace
}  // namespace cnn

int main() {
  std::printf("[\n");
  cnn::dump_image(13, 10, 3, 71, false);
  cnn::dump_image(9, 12, 1, 72, true);
  std::printf("]\n");
  return 0;
}
