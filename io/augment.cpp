#include "io/augment.h"

#include <cmath>

#include "kernels/rng.h"

namespace cnn {

namespace {
// Separate streams keep each kind of draw independent of whether the others are on.
const uint64_t kGeomStream = 0x47454f4dull, kEraseStream = 0x4552415345ull, kRotateStream = 0x524f54ull,
               kJitterStream = 0x4a4954ull;

CounterRng sample_rng(uint64_t seed, uint64_t stream, int64_t epoch, int64_t id) {
  return CounterRng(seed ^ stream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
}

// Crop offset and flip of one sample.
struct GeomDraw {
  int dy, dx;
  bool flip;
};

GeomDraw draw_geometric(const AugmentConfig& a, int64_t epoch, int64_t id) {
  CounterRng rng = sample_rng(a.seed, kGeomStream, epoch, id);
  const int pad = a.crop_pad;
  GeomDraw g;
  g.dy = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  g.dx = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  g.flip = a.flip && (rng.next() >> 63);
  return g;
}

// The erased rectangle of one sample; false when none.
bool draw_erase(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int* y0, int* x0, int* eh, int* ew) {
  CounterRng rng = sample_rng(a.seed, kEraseStream, epoch, id);
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

// A jitter factor uniform in [max(0, 1-x), 1+x]; exactly 1 for x = 0. Draws u whatever x is, so each
// factor keeps its place in the stream.
float jitter_factor(CounterRng& rng, float x) {
  const double u = rng.uniform(), lo = x < 1.f ? 1.0 - x : 0.0, hi = 1.0 + x;
  return x > 0.f ? static_cast<float>(lo + (hi - lo) * u) : 1.f;
}

}  // namespace

ImageAug draw_augment(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w) {
  ImageAug r;
  if (a.crop_pad > 0 || a.flip) {
    const GeomDraw g = draw_geometric(a, epoch, id);
    r.dy = g.dy;
    r.dx = g.dx;
    r.flip = g.flip;
  }
  if (a.rotate > 0.f) {
    CounterRng rng = sample_rng(a.seed, kRotateStream, epoch, id);
    const double radians = a.rotate * (2.0 * rng.uniform() - 1.0) * (M_PI / 180.0);
    r.rot_cos = static_cast<float>(std::cos(radians));
    r.rot_sin = static_cast<float>(std::sin(radians));
  }
  if (a.brightness > 0.f || a.contrast > 0.f || a.saturation > 0.f) {
    CounterRng rng = sample_rng(a.seed, kJitterStream, epoch, id);
    r.brightness = jitter_factor(rng, a.brightness);
    r.contrast = jitter_factor(rng, a.contrast);
    r.saturation = jitter_factor(rng, a.saturation);
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
