#include "io/augment.h"

#include <cmath>
#include <cstring>

#include "kernels/rng.h"

namespace cnn {

namespace {
// Separate streams keep crop/flip draws independent of whether erasing is on.
const uint64_t kGeomStream = 0x47454f4dull, kEraseStream = 0x4552415345ull;

// Crop offset and flip of one sample.
struct GeomDraw {
  int dy, dx;
  bool flip;
};

GeomDraw draw_geometric(const AugmentConfig& a, int64_t epoch, int64_t id) {
  CounterRng rng(a.seed ^ kGeomStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  const int pad = a.crop_pad;
  GeomDraw g;
  g.dy = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  g.dx = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  g.flip = a.flip && (rng.next() >> 63);
  return g;
}

// The erased rectangle of one sample; false when none.
bool draw_erase(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int* y0, int* x0, int* eh, int* ew) {
  CounterRng rng(a.seed ^ kEraseStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  if (!(rng.uniform() < a.erase_p)) return false;
  const double area = static_cast<double>(h) * w;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.02 + (0.33 - 0.02) * rng.uniform());
    const double ratio = std::exp(std::log(0.3) + (std::log(3.3) - std::log(0.3)) * rng.uniform());
    *eh = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    *ew = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (*eh < 1 || *ew < 1 || *eh >= h || *ew >= w) continue;
    *y0 = static_cast<int>(rng.below(h - *eh + 1));
    *x0 = static_cast<int>(rng.below(w - *ew + 1));
    return true;
  }
  return false;
}

}  // namespace

void augment_geometric(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, const uint8_t* src,
                       uint8_t* dst) {
  const GeomDraw g = draw_geometric(a, epoch, id);
  for (int y = 0; y < h; ++y) {
    const int sy = y + g.dy;
    for (int x = 0; x < w; ++x) {
      uint8_t* out = dst + (static_cast<size_t>(y) * w + x) * c;
      const int sx = (g.flip ? w - 1 - x : x) + g.dx;
      if (sy < 0 || sy >= h || sx < 0 || sx >= w)
        std::memset(out, 0, c);
      else
        std::memcpy(out, src + (static_cast<size_t>(sy) * w + sx) * c, c);
    }
  }
}

void augment_erase(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, float* img) {
  int y0, x0, eh, ew;
  if (!draw_erase(a, epoch, id, h, w, &y0, &x0, &eh, &ew)) return;
  for (int y = y0; y < y0 + eh; ++y) std::memset(img + (static_cast<size_t>(y) * w + x0) * c, 0, sizeof(float) * ew * c);
}

ImageAug draw_augment(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w) {
  ImageAug r;
  if (a.geometric()) {
    const GeomDraw g = draw_geometric(a, epoch, id);
    r.dy = g.dy;
    r.dx = g.dx;
    r.flip = g.flip;
  }
  int y0, x0, eh, ew;
  if (a.erase_p > 0.f && draw_erase(a, epoch, id, h, w, &y0, &x0, &eh, &ew)) {
    r.erase_y = y0;
    r.erase_x = x0;
    r.erase_h = eh;
    r.erase_w = ew;
  }
  return r;
}

}  // namespace cnn
