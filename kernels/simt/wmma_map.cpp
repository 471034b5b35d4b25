// The wmma fragment element mapping of each launch (simt_wmma.h): fixed, or scrambled per launch so that a
// kernel depending on which lane holds which element gives wrong results.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "kernels/simt/engine.h"

namespace simt {
namespace {

bool scramble_from_env() {
  const char* env = std::getenv("CNNTRAIN_SIMT_WMMA_SCRAMBLE");
  return env && std::strcmp(env, "0") != 0 && env[0] != '\0';
}

std::atomic<bool> g_scramble{scramble_from_env()};

using detail::WmmaMap;

// The fixed mapping: x[i] of a matrix_a/b fragment is tile element i in every lane; accumulator element i
// of lane l is tile element 32 i + l.
void fill_fixed(WmmaMap& m) {
  m.scrambled = false;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    std::iota(std::begin(m.a_slot[l]), std::end(m.a_slot[l]), 0);
    std::iota(std::begin(m.b_slot[l]), std::end(m.b_slot[l]), 0);
  }
  std::iota(std::begin(m.acc), std::end(m.acc), 0);
}

void shuffle(uint8_t (&p)[256], uint64_t& rng) {
  std::iota(std::begin(p), std::end(p), 0);
  for (unsigned i = 256; i > 1; --i) std::swap(p[i - 1], p[detail::splitmix64(rng) % i]);
}

// Fresh permutations: of each lane's matrix_a and matrix_b elements, and of which lane holds which
// accumulator element.
void fill_scrambled(WmmaMap& m, uint64_t key) {
  m.scrambled = true;
  uint64_t rng = key ^ 0x5851F42D4C957F2Dull;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    shuffle(m.a_slot[l], rng);
    shuffle(m.b_slot[l], rng);
  }
  shuffle(m.acc, rng);
}

}  // namespace

void set_wmma_scramble(bool on) { g_scramble.store(on); }
bool wmma_scramble() { return g_scramble.load(); }

namespace detail {

// Drawn on the first wmma call of a launch, so launches without wmma cost nothing; kept for the rest of the
// launch in t_wmma_map, which every launch clears.
const WmmaMap& draw_wmma_map() {
  struct Maps {
    WmmaMap fixed, scrambled;
    bool fixed_ready = false;
  };
  static thread_local std::unique_ptr<Maps> maps = std::make_unique<Maps>();
  if (g_scramble.load()) {
    fill_scrambled(maps->scrambled, engine().launch_key());
    t_wmma_map = &maps->scrambled;
  } else {
    if (!maps->fixed_ready) {
      fill_fixed(maps->fixed);
      maps->fixed_ready = true;
    }
    t_wmma_map = &maps->fixed;
  }
  return *t_wmma_map;
}

}  // namespace detail
}  // namespace simt
