#include "io/augment.h"

#include <cmath>
#include <cstring>

#include "kernels/rng.h"

namespace cnn {

namespace {
// Separate streams keep crop/flip draws independent of whether erasing is on.
const uint64_t kGeomStream = 0x47454f4dull, kEraseStream = 0x4552415345ull;
}

void augment_geometric(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, const uint8_t* src,
                       uint8_t* dst) {
  CounterRng rng(a.seed ^ kGeomStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  const int pad = a.crop_pad;
  const int dy = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  const int dx = pad > 0 ? static_cast<int>(rng.below(2 * pad + 1)) - pad : 0;
  const bool flip = a.flip && (rng.next() >> 63);
  for (int y = 0; y < h; ++y) {
    const int sy = y + dy;
    for (int x = 0; x < w; ++x) {
      uint8_t* out = dst + (static_cast<size_t>(y) * w + x) * c;
      const int sx = (flip ? w - 1 - x : x) + dx;
      if (sy < 0 || sy >= h || sx < 0 || sx >= w)
        std::memset(out, 0, c);
      else
        std::memcpy(out, src + (static_cast<size_t>(sy) * w + sx) * c, c);
    }
  }
}

void augment_erase(const AugmentConfig& a, int64_t epoch, int64_t id, int h, int w, int c, float* img) {
  CounterRng rng(a.seed ^ kEraseStream, hash_key(static_cast<uint64_t>(epoch), static_cast<uint64_t>(id)));
  if (!(rng.uniform() < a.erase_p)) return;
  const double area = static_cast<double>(h) * w;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.02 + (0.33 - 0.02) * rng.uniform());
    const double ratio = std::exp(std::log(0.3) + (std::log(3.3) - std::log(0.3)) * rng.uniform());
    const int eh = static_cast<int>(std::lround(std::sqrt(target * ratio)));
    const int ew = static_cast<int>(std::lround(std::sqrt(target / ratio)));
    if (eh < 1 || ew < 1 || eh >= h || ew >= w) continue;
    const int y0 = static_cast<int>(rng.below(h - eh + 1)), x0 = static_cast<int>(rng.below(w - ew + 1));
    for (int y = y0; y < y0 + eh; ++y)
      std::memset(img + (static_cast<size_t>(y) * w + x0) * c, 0, sizeof(float) * ew * c);
    return;
  }
}

}  // namespace cnn
