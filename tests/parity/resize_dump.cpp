// Resize and crop as cnntrain plans and applies them (io/resize.h), written as JSON for
// tests/parity/resize_parity.py, which applies torchvision's resized_crop + hflip (training) and resize +
// center_crop (evaluation) with antialias=True to the same image: for a 3-channel and a 1-channel image,
// several training samples' boxes and the evaluation plan, each with cnntrain's uint8 output.
// Usage: resize_dump > out.json
#include <cstdio>
#include <vector>

#include "io/resize.h"
#include "kernels/rng.h"

namespace cnn {
namespace {

void dump_plan(const ResizeOptions& o, const ResizePlan& p, const std::vector<uint8_t>& px, int h, int w, int c,
               bool last) {
  std::vector<uint8_t> out(static_cast<size_t>(o.height) * o.width * c);
  resize_antialiased(px.data(), h, w, c, p, out.data(), o.height, o.width);
  std::printf("  {\"train\": %s, \"top\": %d, \"left\": %d, \"height\": %d, \"width\": %d, \"flip\": %s, "
              "\"resize\": %d, \"out\": [", o.train ? "true" : "false", p.y, p.x, p.h, p.w,
              p.flip ? "true" : "false", o.test_resize);
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("]}%s\n", last ? "" : ",");
}

void dump_image(int h, int w, int c, int oh, int ow, int test_resize, uint64_t seed, bool last) {
  CounterRng rng(seed, 1);
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * c);
  for (auto& p : px) p = static_cast<uint8_t>(rng.next() >> 56);
  ResizeOptions o;
  o.height = oh, o.width = ow, o.seed = seed, o.test_resize = test_resize;
  std::printf("{\"h\": %d, \"w\": %d, \"c\": %d, \"oh\": %d, \"ow\": %d, \"pixels\": [", h, w, c, oh, ow);
  for (size_t i = 0; i < px.size(); ++i) std::printf("%s%d", i ? ", " : "", px[i]);
  std::printf("], \"samples\": [\n");
  dump_plan(o, resize_center_crop(o, h, w), px, h, w, c, false);
  o.train = true;
  const int samples = 8;
  for (int id = 0; id < samples; ++id) dump_plan(o, plan_resize(o, 1, id, h, w), px, h, w, c, id + 1 == samples);
  std::printf("]}%s\n", last ? "" : ",");
}

}  // namespace
}  // namespace cnn

int main() {
  std::printf("[\n");
  cnn::dump_image(37, 53, 3, 16, 16, 0, 81, false);  // downscaled: the antialiasing filter matters
  cnn::dump_image(28, 28, 1, 32, 32, 0, 82, false);  // Fashion-MNIST to 32x32: upscaled, eval Resize(37)
  cnn::dump_image(40, 30, 3, 12, 20, 24, 83, true);  // non-square target, explicit test_resize
  std::printf("]\n");
  return 0;
}
