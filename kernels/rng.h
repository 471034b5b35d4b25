// Counter-based random numbers: a value is a pure function of (seed, counters), so results never depend on
// the rank count, thread count or call order (data order, augmentation, dropout masks, initialisation).
// Header-only and free of library calls so device code can use it too.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace cnn {

// SplitMix64 finaliser: a bijective 64-bit mix with good avalanche.
CNN_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

CNN_HD uint64_t hash_key(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

// Uniform float in [0, 1) from the top 24 bits.
CNN_HD float uniform01(uint64_t bits) { return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f); }

// A sequential stream keyed by (seed, stream); next() hashes an incrementing counter.
class CounterRng {
 public:
  CNN_HD CounterRng(uint64_t seed, uint64_t stream) : key_(hash_key(seed, stream)), ctr_(0) {}
  CNN_HD uint64_t next() { return mix64(key_ ^ mix64(ctr_++)); }
  // Uniform integer in [0, n) (multiply-shift; bias below 2^-32 for n < 2^32).
  CNN_HD uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
  CNN_HD float uniform() { return uniform01(next()); }

 private:
  uint64_t key_, ctr_;
};

}  // namespace cnn
