// Kernels whose blocks share data, correct and with planted races between blocks.
#include "tests/simt/grid_kernels.h"

__global__ void racy_block_count_kernel(int* counter) {
  CNN_SHARED(int, seen, );
  if (threadIdx.x == 0) seen = *counter;
  __syncthreads();
  if (threadIdx.x == 0) *counter = seen + 1;
}

constexpr int kSumBlock = 64;

template <bool kClaimFirst>
__global__ void last_block_sum_kernel(const float* x, int n, float* partial, unsigned* done, float* out) {
  CNN_SHARED(float, sums, [kSumBlock]);
  CNN_SHARED(int, last, );
  const int tid = threadIdx.x;
  float acc = 0.0f;
  for (int i = blockIdx.x * kSumBlock + tid; i < n; i += gridDim.x * kSumBlock) acc += x[i];
  sums[tid] = acc;
  __syncthreads();
  for (int stride = kSumBlock / 2; stride > 0; stride >>= 1) {
    if (tid < stride) sums[tid] += sums[tid + stride];
    __syncthreads();
  }
  if (tid == 0) {
    if (kClaimFirst) {
      const unsigned ticket = atomicAdd(done, 1u);
      partial[blockIdx.x] = sums[0];
      last = ticket == gridDim.x - 1;
    } else {
      partial[blockIdx.x] = sums[0];
      __threadfence();  // the partial is visible to every block before the ticket is
      last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
  }
  __syncthreads();
  if (last && tid == 0) {
    const volatile float* published = partial;  // past L1, which is not coherent between multiprocessors
    float total = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) total += published[b];
    *out = total;
    *done = 0;
  }
}

cudaError_t run_racy_block_count(int* counter, int grid) {
  return CNN_LAUNCH(racy_block_count_kernel, grid, 32, 0, 0, counter);
}

cudaError_t run_last_block_sum(const float* x, int n, float* partial, unsigned* done, float* out, int grid,
                               bool claim_first) {
  auto* k = claim_first ? &last_block_sum_kernel<true> : &last_block_sum_kernel<false>;
  return CNN_LAUNCH(k, grid, kSumBlock, 0, 0, x, n, partial, done, out);
}
