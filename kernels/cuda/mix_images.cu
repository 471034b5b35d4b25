// Mixup and cutmix of the prepared batch in place (kernels/mix_images.h): one thread per element of a pair of
// partners (2k, 2k+1), which reads both values before writing both, so no thread sees a value another has
// already mixed.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/mix_images.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void mix_images_kernel(int pairs, int h, int w, int c, const MixDraw* __restrict__ draws,
                                  float* __restrict__ x) {
  const size_t image = static_cast<size_t>(h) * w * c;
  for_each_nhwc(pairs, h, w, c, [&](size_t i, Nhwc at) {
    // Element i of pair k = at.n sits at offset i - k*image in both images of the pair.
    float* a = x + static_cast<size_t>(at.n) * 2 * image + (i - static_cast<size_t>(at.n) * image);
    float* b = a + image;
    const float va = *a, vb = *b;
    *a = mix_images::mixed(draws[2 * at.n], va, vb, at.h, at.w);
    *b = mix_images::mixed(draws[2 * at.n + 1], vb, va, at.h, at.w);
  });
}

}  // namespace

cudaError_t mix_images_cuda(int n, int h, int w, int c, const MixDraw* d_draws, float* d_x, cudaStream_t stream) {
  const int pairs = n / 2;
  if (pairs == 0) return cudaSuccess;
  return CNN_LAUNCH(mix_images_kernel, grid_stride_blocks(static_cast<size_t>(pairs) * h * w * c, kBlock), kBlock, 0,
                    stream, pairs, h, w, c, d_draws, d_x);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
