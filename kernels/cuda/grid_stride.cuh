// The grid-stride loop of the element-wise kernels over an NHWC tensor, with each flat index unflattened to
// its coordinates (channels fastest, so neighbouring threads touch neighbouring addresses).
#pragma once
#include <cstddef>

#include "kernels/cuda/cuda_common.h"

namespace cnn {
namespace CNN_CUDA_NS {

struct Nhwc {  // coordinates of one element of an [n, h, w, c] tensor
  int n, h, w, c;
};

// Calls f(i, at) for each flat index i of an [n, h, w, c] tensor that falls to this thread, at = i's
// coordinates; launch with grid_stride_blocks(n*h*w*c, block).
template <class F>
__device__ __forceinline__ void for_each_nhwc(int n, int h, int w, int c, F&& f) {
  const size_t total = static_cast<size_t>(n) * h * w * c;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t nhw = i / c;
    f(i, Nhwc{static_cast<int>(nhw / w / h), static_cast<int>(nhw / w % h), static_cast<int>(nhw % w),
              static_cast<int>(i % c)});
  }
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
