// The device input path: uint8 NHWC images to the network's float input (crop, flip, rotation, colour jitter,
// normalisation, erasing: kernels/image_prep.h), through the per-pixel functions the reference uses. One block
// per image first sums the grey levels the contrast blends towards (only when some sample jitters contrast),
// then one thread per output pixel writes its channels.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/image_prep.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

// means[s] = the mean of brightened_grey over image s, summed in double (as the reference) by a tree in
// shared memory; images without contrast jitter are skipped (their mean is not read).
__global__ void mean_grey_kernel(int h, int w, int c, const uint8_t* __restrict__ pixels,
                                 const ImageAug* __restrict__ aug, float* __restrict__ means) {
  CNN_SHARED(double, partial, [kBlock]);
  const int s = blockIdx.x, tid = threadIdx.x;
  const ImageAug a = aug[s];
  if (a.contrast == 1.f) return;  // the whole block leaves before any barrier
  const uint8_t* img = pixels + static_cast<size_t>(s) * h * w * c;
  double acc = 0;
  for (int p = tid; p < h * w; p += kBlock) acc += image_prep::brightened_grey(img, h, w, c, a, p / w, p % w);
  partial[tid] = acc;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half >>= 1) {
    if (tid < half) partial[tid] += partial[tid + half];
    __syncthreads();
  }
  if (tid == 0) means[s] = static_cast<float>(partial[0] / (static_cast<double>(h) * w));
}

__global__ void prepare_images_kernel(int n, int h, int w, int c, const uint8_t* __restrict__ pixels,
                                      const ImageAug* __restrict__ aug, const float* __restrict__ means,
                                      const float* __restrict__ scale_shift, float* __restrict__ x) {
  for_each_nhwc(n, h, w, 1, [&](size_t i, Nhwc at) {
    const ImageAug a = aug ? aug[at.n] : ImageAug{};
    const float mean_grey = a.contrast != 1.f ? means[at.n] : 0.f;  // written by mean_grey_kernel
    image_prep::prepare_pixel(pixels + static_cast<size_t>(at.n) * h * w * c, h, w, c, a, mean_grey, scale_shift,
                              scale_shift + c, at.h, at.w, x + i * c);
  });
}

}  // namespace

cudaError_t prepare_images_cuda(int n, int h, int w, int c, const uint8_t* d_pixels, const ImageAug* d_aug,
                                float* d_means, const float* d_scale_shift, float* d_x, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * h * w;
  if (total == 0) return cudaSuccess;
  if (d_means) {
    const cudaError_t e = CNN_LAUNCH(mean_grey_kernel, n, kBlock, 0, stream, h, w, c, d_pixels, d_aug, d_means);
    if (e != cudaSuccess) return e;
  }
  return CNN_LAUNCH(prepare_images_kernel, grid_stride_blocks(total, kBlock), kBlock, 0, stream, n, h, w, c, d_pixels,
                    d_aug, d_means, d_scale_shift, d_x);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
