#include "kernels/dropout.h"

#include "kernels/rng.h"

namespace cnn {

void dropout_forward_cpu(int n, size_t per_sample, const float* x, float p, uint64_t key, const int64_t* ids,
                         float* y, uint8_t* mask) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (int s = 0; s < n; ++s) {
    const uint64_t sk = hash_key(key, static_cast<uint64_t>(ids[s]));
    const size_t o = static_cast<size_t>(s) * per_sample;
    for (size_t j = 0; j < per_sample; ++j) {
      const uint8_t keep = uniform01(mix64(sk ^ mix64(j))) >= p;
      mask[o + j] = keep;
      y[o + j] = keep ? x[o + j] * keep_scale : 0.f;
    }
  }
}

void dropout_backward_cpu(size_t count, float p, const float* dy, const uint8_t* mask, float* dx) {
  const float keep_scale = 1.0f / (1.0f - p);
  for (size_t i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * keep_scale : 0.f;
}

}  // namespace cnn
