#include "io/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/rng.h"
#include "src/base/error.h"

namespace cnn {

namespace {

const uint64_t kResizeStream = 0x52524358ull;  // its own stream: independent of the other augmentation draws

// Python's round(): half to even (the default rounding mode).
int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }

}  // namespace

int default_test_resize(int height, int width) { return round_even(std::max(height, width) / 0.875); }

ResizePlan random_resized_crop(const ResizeOptions& o, int sh, int sw, const std::function<double()>& uniform) {
  ResizePlan p;
  p.rh = o.height, p.rw = o.width;
  const double area = static_cast<double>(sh) * sw, log_lo = std::log(o.min_ratio), log_hi = std::log(o.max_ratio);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target = area * (o.min_scale + (o.max_scale - o.min_scale) * uniform());
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * uniform());
    const int w = round_even(std::sqrt(target * ratio)), h = round_even(std::sqrt(target / ratio));
    if (w < 1 || w > sw || h < 1 || h > sh) continue;
    p.h = h, p.w = w;
    p.y = std::min(static_cast<int>(uniform() * (sh - h + 1)), sh - h);
    p.x = std::min(static_cast<int>(uniform() * (sw - w + 1)), sw - w);
    found = true;
  }
  if (!found) {  // the central box of the nearest allowed aspect
    const double in_ratio = static_cast<double>(sw) / sh;
    p.h = sh, p.w = sw;
    if (in_ratio < o.min_ratio) p.h = round_even(sw / o.min_ratio);
    if (in_ratio > o.max_ratio) p.w = round_even(sh * o.max_ratio);
    p.y = (sh - p.h) / 2, p.x = (sw - p.w) / 2;
  }
  p.flip = uniform() < 0.5;
  return p;
}

ResizePlan resize_center_crop(const ResizeOptions& o, int sh, int sw) {
  const int size = o.test_resize > 0 ? o.test_resize : default_test_resize(o.height, o.width);
  ResizePlan p;
  p.h = sh, p.w = sw;
  // torchvision's _compute_resized_output_size: the longer side truncated, as int() does.
  const int other = static_cast<int>(static_cast<double>(size) * std::max(sh, sw) / std::min(sh, sw));
  p.rh = sh <= sw ? size : other;
  p.rw = sh <= sw ? other : size;
  if (p.rh < o.height || p.rw < o.width)
    raise(kExitUsage, "option --data.test_resize %d: %dx%d images resize to %dx%d, smaller than the %dx%d center "
          "crop (--data.image_size); give a larger value", size, sh, sw, p.rh, p.rw, o.height, o.width);
  p.oy = round_even((p.rh - o.height) / 2.0);
  p.ox = round_even((p.rw - o.width) / 2.0);
  return p;
}

ResizePlan plan_resize(const ResizeOptions& o, int64_t epoch, int64_t id, int sh, int sw) {
  if (!o.train) return resize_center_crop(o, sh, sw);
  CounterRng rng(o.seed ^ kResizeStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  return random_resized_crop(o, sh, sw, [&rng] { return static_cast<double>(rng.uniform()); });
}

namespace {

// The source taps of `n` output positions along one axis: output k reads `len` pixels from start[k] with
// weights w[k * taps ..]. torchvision's _compute_weights_aa (bilinear: the triangle filter, interp_size 2),
// with its float/double mix of arithmetic, so that results agree to rounding.
struct AxisTaps {
  int taps = 0;
  std::vector<int> start, len;
  std::vector<float> w;
};

// in: the box length in source pixels, at offset `box`; r: its resized length; output k is resized position
// `window + k` (`window + n - 1 - k` when mirrored).
AxisTaps axis_taps(int box, int in, int r, int window, int n, bool mirror) {
  AxisTaps a;
  const float scale = static_cast<float>(in) / r;
  const float support = scale >= 1.f ? scale : 1.f;
  const float invscale = scale >= 1.f ? static_cast<float>(1.0 / scale) : 1.f;
  a.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.start.resize(n), a.len.resize(n), a.w.assign(static_cast<size_t>(n) * a.taps, 0.f);
  for (int k = 0; k < n; ++k) {
    const int i = window + (mirror ? n - 1 - k : k);
    const float center = static_cast<float>(scale * (i + 0.5));
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int len = std::min(static_cast<int>(center + support + 0.5), in) - lo;
    float* w = &a.w[static_cast<size_t>(k) * a.taps];
    float total = 0.f;
    for (int j = 0; j < len; ++j) {
      const float x = std::fabs(static_cast<float>((j + lo - center + 0.5) * invscale));
      w[j] = x < 1.f ? 1.f - x : 0.f;
      total += w[j];
    }
    for (int j = 0; j < len && total != 0.f; ++j) w[j] /= total;
    a.start[k] = box + lo;
    a.len[k] = len;
  }
  return a;
}

}  // namespace

void resize_antialiased(const uint8_t* src, int sh, int sw, int c, const ResizePlan& p, uint8_t* dst, int oh,
                        int ow) {
  CNN_CHECK(p.y >= 0 && p.x >= 0 && p.h > 0 && p.w > 0 && p.y + p.h <= sh && p.x + p.w <= sw,
            "resize box %dx%d at (%d, %d) outside the %dx%d image", p.h, p.w, p.y, p.x, sh, sw);
  const AxisTaps ax = axis_taps(p.x, p.w, p.rw, p.ox, ow, p.flip), ay = axis_taps(p.y, p.h, p.rh, p.oy, oh, false);
  // Horizontal pass over the source rows the output reads, then vertical, as torchvision's separable code.
  const int row0 = ay.start[0], rows_used = ay.start[oh - 1] + ay.len[oh - 1] - row0;
  const size_t row = static_cast<size_t>(ow) * c;
  std::vector<float> rows(rows_used * row);
  for (int y = 0; y < rows_used; ++y) {
    const uint8_t* s = src + static_cast<size_t>(row0 + y) * sw * c;
    for (int k = 0; k < ow; ++k) {
      const float* w = &ax.w[static_cast<size_t>(k) * ax.taps];
      for (int ch = 0; ch < c; ++ch) {
        float acc = 0.f;
        for (int j = 0; j < ax.len[k]; ++j) acc += w[j] * s[(ax.start[k] + j) * c + ch];
        rows[y * row + k * c + ch] = acc;
      }
    }
  }
  for (int k = 0; k < oh; ++k) {
    const float* w = &ay.w[static_cast<size_t>(k) * ay.taps];
    const float* t = &rows[(ay.start[k] - row0) * row];
    for (size_t i = 0; i < row; ++i) {
      float acc = 0.f;
      for (int j = 0; j < ay.len[k]; ++j) acc += w[j] * t[j * row + i];
      dst[k * row + i] = static_cast<uint8_t>(std::nearbyint(std::min(std::max(acc, 0.f), 255.f)));
    }
  }
}

}  // namespace cnn
