// Count of non-finite values (kernels/nonfinite.h), for gradient checks every step: a grid-stride scan in
// which a thread touches the counters only when it found a bad value, so a finite buffer costs one read and
// no atomics.
#include "kernels/cuda/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock) count_nonfinite_kernel(size_t n, const float* __restrict__ x,
                                                                 long long base, long long* __restrict__ stats) {
  long long count = 0, last = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) {
      ++count;
      last = static_cast<long long>(i) + 1;
    }
  }
  if (count > 0) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&stats[0]), static_cast<unsigned long long>(count));
    atomicMax(&stats[1], base + last);
  }
}

}  // namespace

cudaError_t count_nonfinite_cuda(size_t n, const float* d_x, int64_t base, int64_t* d_stats, cudaStream_t stream) {
  return CNN_LAUNCH(count_nonfinite_kernel, grid_stride_blocks(n, kBlock), kBlock, 0, stream, n, d_x,
                    static_cast<long long>(base), reinterpret_cast<long long*>(d_stats));
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
