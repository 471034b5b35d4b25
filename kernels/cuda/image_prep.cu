// The device input path: uint8 NHWC images to the network's float input (crop, flip, normalise, erase), one
// thread per output element in a grid-stride loop. Same arithmetic as the reference in image_prep_cpu.cpp.
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void prepare_images_kernel(int n, int h, int w, int c, const uint8_t* __restrict__ pixels,
                                      const ImageAug* __restrict__ aug, const float* __restrict__ scale_shift,
                                      float* __restrict__ x) {
  const size_t image = static_cast<size_t>(h) * w * c;
  const size_t total = image * n;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int s = static_cast<int>(i / image);
    const int rest = static_cast<int>(i - static_cast<size_t>(s) * image);
    const int ch = rest % c, yx = rest / c;
    const int xx = yx % w, y = yx / w;
    const ImageAug a = aug ? aug[s] : ImageAug{};
    if (a.erase_h > 0 && y >= a.erase_y && y < a.erase_y + a.erase_h && xx >= a.erase_x &&
        xx < a.erase_x + a.erase_w) {
      x[i] = 0.f;
      continue;
    }
    const int sy = y + a.dy, sx = (a.flip ? w - 1 - xx : xx) + a.dx;
    const bool in = sy >= 0 && sy < h && sx >= 0 && sx < w;
    const uint8_t v = in ? pixels[static_cast<size_t>(s) * image + (static_cast<size_t>(sy) * w + sx) * c + ch] : 0;
    x[i] = v * scale_shift[ch] + scale_shift[c + ch];
  }
}

}  // namespace

cudaError_t prepare_images_cuda(int n, int h, int w, int c, const uint8_t* d_pixels, const ImageAug* d_aug,
                                const float* d_scale_shift, float* d_x, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * h * w * c;
  if (total == 0) return cudaSuccess;
  return CNN_LAUNCH(prepare_images_kernel, grid_stride_blocks(total, kBlock), kBlock, 0, stream, n, h, w, c, d_pixels,
                    d_aug, d_scale_shift, d_x);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
