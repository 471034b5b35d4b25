// Inverted dropout: y = x * keep / (1 - p) with keep ~ Bernoulli(1 - p). The keep bit of element j of a sample
// is a pure function of (key, global sample id, j), so masks do not depend on the rank count, the local
// batch position or the thread count. key = hash(seed, step, layer) is chosen by the layer. Specifically
// (kernels/rng.h; every backend computes exactly this): with m the SplitMix64 finaliser mix64,
//   sample key k = m(m(m(m(key) ^ id))),  u = (m(k ^ m(j)) >> 40) / 2^24,  keep = u >= p.
// x, y: [n, per_sample]; ids: [n] global sample ids; mask: [n, per_sample] bytes (1 = kept).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cnn {

void dropout_forward_cpu(int n, size_t per_sample, const float* x, float p, uint64_t key, const int64_t* ids,
                         float* y, uint8_t* mask);
// dx = dy * mask / (1 - p) over `count` elements.
void dropout_backward_cpu(size_t count, float p, const float* dy, const uint8_t* mask, float* dx);

}  // namespace cnn
