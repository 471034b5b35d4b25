// The input path's pixel work (Backend::upload_images, and the loader thread for the CPU backend): uint8 NHWC
// images to the network's float input, with the random draws made on the host (io/augment.h). Per sample
// (ImageAug), in this order:
//   1. crop with zero padding and horizontal flip (whole pixels);
//   2. rotation about the image centre: output (y, x) is the bilinear interpolation, at
//        x' = cx + cos*(x - cx) - sin*(y - cy),  y' = cy + sin*(x - cx) + cos*(y - cy),  cx = (w-1)/2, cy = (h-1)/2,
//      of the image of 1 extended by zeros (torchvision's F.rotate(img, angle, BILINEAR): counter-clockwise
//      for a positive angle);
//   3. colour jitter in 0..255 units, each step clamped to [0, 255] (torchvision's adjust_* on a float image
//      times 255): brightness b: v*b; contrast k: k*v + (1-k)*m, m the mean grey level of the image after
//      2 and brightness; saturation s: s*v + (1-s)*grey of the pixel (3 channels only; no-op for 1);
//      grey = 0.299 R + 0.587 G + 0.114 B (ITU-R 601), one channel: itself;
//   4. normalisation: v * (1/std) + (-mean/std);
//   5. random erasing: the rectangle set to 0.
// Steps left at their ImageAug defaults cost nothing and change no bit. The per-pixel functions are shared by
// the reference (prepare_images_cpu) and the CUDA kernel, so both interpolate and blend alike.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/host_device.h"

namespace cnn {

// x: [b.n, b.h, b.w, b.c] float. Host pointers. Contrast and saturation expect 1 or 3 channels.
void prepare_images_cpu(const ImageBatch& b, float* x);

namespace image_prep {

// Channel ch of pixel (y, x) of one image after crop and flip; 0 outside the image or in the crop's padding.
CNN_HD float cropped(const uint8_t* img, int h, int w, int c, const ImageAug& a, int y, int x, int ch) {
  if (y < 0 || y >= h || x < 0 || x >= w) return 0.f;
  const int sy = y + a.dy, sx = (a.flip ? w - 1 - x : x) + a.dx;
  if (sy < 0 || sy >= h || sx < 0 || sx >= w) return 0.f;
  return img[(static_cast<size_t>(sy) * w + sx) * c + ch];
}

// After the rotation (step 2).
CNN_HD float rotated(const uint8_t* img, int h, int w, int c, const ImageAug& a, int y, int x, int ch) {
  if (a.rot_cos == 1.f && a.rot_sin == 0.f) return cropped(img, h, w, c, a, y, x, ch);
  const float cx = 0.5f * (w - 1), cy = 0.5f * (h - 1), xr = x - cx, yr = y - cy;
  const float fx = cx + a.rot_cos * xr - a.rot_sin * yr, fy = cy + a.rot_sin * xr + a.rot_cos * yr;
  const float x0 = floorf(fx), y0 = floorf(fy), tx = fx - x0, ty = fy - y0;
  const int ix = static_cast<int>(x0), iy = static_cast<int>(y0);
  const float top = (1.f - tx) * cropped(img, h, w, c, a, iy, ix, ch) + tx * cropped(img, h, w, c, a, iy, ix + 1, ch);
  const float bottom =
      (1.f - tx) * cropped(img, h, w, c, a, iy + 1, ix, ch) + tx * cropped(img, h, w, c, a, iy + 1, ix + 1, ch);
  return (1.f - ty) * top + ty * bottom;
}

CNN_HD float clamp255(float v) { return v < 0.f ? 0.f : (v > 255.f ? 255.f : v); }
CNN_HD float blend(float v, float other, float f) { return clamp255(f * v + (1.f - f) * other); }
CNN_HD float grey(float r, float g, float b) { return 0.299f * r + 0.587f * g + 0.114f * b; }

// After the rotation and brightness: what the contrast's mean is taken over.
CNN_HD float brightened(const uint8_t* img, int h, int w, int c, const ImageAug& a, int y, int x, int ch) {
  const float v = rotated(img, h, w, c, a, y, x, ch);
  return a.brightness == 1.f ? v : clamp255(v * a.brightness);
}

CNN_HD float brightened_grey(const uint8_t* img, int h, int w, int c, const ImageAug& a, int y, int x) {
  if (c != 3) return brightened(img, h, w, c, a, y, x, 0);
  return grey(brightened(img, h, w, c, a, y, x, 0), brightened(img, h, w, c, a, y, x, 1),
              brightened(img, h, w, c, a, y, x, 2));
}

// The c network inputs of output pixel (y, x) of one image into out. mean_grey: the image's mean of
// brightened_grey (read only when a.contrast != 1); scale, shift: [c] normalisation.
CNN_HD void prepare_pixel(const uint8_t* img, int h, int w, int c, const ImageAug& a, float mean_grey,
                          const float* scale, const float* shift, int y, int x, float* out) {
  if (a.erase_h > 0 && y >= a.erase_y && y < a.erase_y + a.erase_h && x >= a.erase_x && x < a.erase_x + a.erase_w) {
    for (int ch = 0; ch < c; ++ch) out[ch] = 0.f;
    return;
  }
  for (int ch = 0; ch < c; ++ch) out[ch] = brightened(img, h, w, c, a, y, x, ch);
  if (a.contrast != 1.f)
    for (int ch = 0; ch < c; ++ch) out[ch] = blend(out[ch], mean_grey, a.contrast);
  if (a.saturation != 1.f && c == 3) {
    const float g = grey(out[0], out[1], out[2]);
    for (int ch = 0; ch < c; ++ch) out[ch] = blend(out[ch], g, a.saturation);
  }
  for (int ch = 0; ch < c; ++ch) out[ch] = out[ch] * scale[ch] + shift[ch];
}

}  // namespace image_prep
}  // namespace cnn
