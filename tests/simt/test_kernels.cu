// Kernels exercising the portable subset the SIMT emulator supports, and planted bugs it must catch. Kept
// valid CUDA: `make simt-nvcc-check` compiles this file with nvcc for sm_80 and sm_90.
#include "tests/simt/test_kernels.h"

namespace {

constexpr unsigned kFull = 0xffffffffu;

template <int kBlock>
__global__ void block_reduce_kernel(const float* __restrict__ x, int n, float* __restrict__ block_sums) {
  CNN_SHARED(float, partial, [kBlock]);
  const int tid = threadIdx.x;
  float acc = 0.0f;
  for (int i = blockIdx.x * kBlock + tid; i < n; i += gridDim.x * kBlock) acc += x[i];
  partial[tid] = acc;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) block_sums[blockIdx.x] = partial[0];
}

__global__ void block_reduce_missing_sync_kernel(const float* x, int n, float* block_sums) {
  CNN_SHARED(float, partial, [128]);
  const int tid = threadIdx.x;
  float acc = 0.0f;
  for (int i = blockIdx.x * 128 + tid; i < n; i += gridDim.x * 128) acc += x[i];
  partial[tid] = acc;
  __syncthreads();
  for (int stride = 64; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
  }
  if (tid == 0) block_sums[blockIdx.x] = partial[0];
}

__global__ void shift_kernel(const float* x, float* y, int n, bool with_sync) {
  CNN_SHARED(float, staged, [64]);
  const int tid = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + tid;
  staged[tid] = i < n ? x[i] : 0.0f;
  if (with_sync) __syncthreads();
  if (i < n) y[i] = tid > 0 ? staged[tid - 1] : 0.0f;
}

__global__ void warp_reduce_kernel(const float* x, int n, float* out) {
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFull, v, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}

__global__ void warp_allreduce_kernel(const float* x, float* y, int n, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  for (int m = width / 2; m > 0; m >>= 1) v += __shfl_xor_sync(kFull, v, m, width);
  if (i < n) y[i] = v;
}

__global__ void warp_scan_kernel(const int* x, int* y, int* y2, int n, int width) {
  const int i = threadIdx.x;
  const int lane = i & 31;
  const unsigned mask = __ballot_sync(kFull, i < n);
  if (i >= n) return;
  int v = x[i];
  const int first = __shfl_sync(mask, v, 0, width);
  for (int d = 1; d < width; d <<= 1) {
    const int up = __shfl_up_sync(mask, v, d, width);
    if (lane % width >= d) v += up;
  }
  y[i] = v;
  y2[i] = first;
}

__global__ void votes_kernel(const int* x, int n, unsigned* ballot, int* any, int* all) {
  const int i = threadIdx.x;
  const unsigned mask = __ballot_sync(kFull, i < n);
  if (i >= n) return;
  const int pred = x[i] != 0;
  const unsigned b = __ballot_sync(mask, pred);
  const int a = __any_sync(mask, pred);
  const int l = __all_sync(mask, pred);
  if ((i & 31) == 0) {
    ballot[i / 32] = b;
    any[i / 32] = a;
    all[i / 32] = l;
  }
}

__global__ void block_votes_kernel(const int* x, int n, int* counts) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int pred = i < n && x[i] != 0;
  const int c = __syncthreads_count(pred);
  const int a = __syncthreads_and(pred);
  const int o = __syncthreads_or(pred);
  if (threadIdx.x == 0) {
    counts[blockIdx.x * 3 + 0] = c;
    counts[blockIdx.x * 3 + 1] = a;
    counts[blockIdx.x * 3 + 2] = o;
  }
}

__global__ void atomics_kernel(const int* x, int n, int nbins, AtomicOut out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int v = x[i];
    atomicAdd(&out.hist[((v % nbins) + nbins) % nbins], 1);
    atomicAdd(out.fsum, static_cast<float>(v));
    atomicAdd(out.dsum, static_cast<double>(v));
    atomicMax(out.imax, v);
    atomicMin(out.imin, v);
    atomicAdd(out.ucount, 1u);
    atomicCAS(out.owner, -1, i);
    atomicExch(out.exch, 7);
  }
}

__global__ void reverse_dynamic_kernel(const float* x, float* y, int n) {
  CNN_DYNAMIC_SHARED(float, buf);
  const int tid = threadIdx.x;
  const int base = blockIdx.x * blockDim.x;
  const int count = min(static_cast<int>(blockDim.x), n - base);
  if (tid < count) buf[tid] = x[base + tid];
  __syncthreads();
  if (tid < count) y[base + tid] = buf[count - 1 - tid];
}

__global__ void index3d_kernel(unsigned* out) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&out[block * per_block + thread], 1u);
}

__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

// The usual two-level block reduction: shuffles within each warp, then warp 0 over the per-warp partials.
__device__ float block_sum(float v) {
  CNN_SHARED(float, warp_partials, [32]);
  CNN_SHARED(float, total, );
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFull, v, offset);
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? warp_partials[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFull, v, offset);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

__global__ void block_sum_kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float s = block_sum(i < n ? x[i] : 0.0f);
  if (i < n) y[i] = s;
}

__global__ void read_uninit_shared_kernel(float* out) {
  CNN_SHARED(float, never_written, [64]);
  out[threadIdx.x] = never_written[threadIdx.x % 64];
}

// Block of 64: neighbours swap through shared memory fenced by __syncwarp; 8-byte values cross lanes.
__global__ void warp_exchange_kernel(const double* x, double* swapped, double* rotated, long long* down, int n) {
  CNN_SHARED(double, stage, [64]);
  const int tid = threadIdx.x;
  const int i = blockIdx.x * 64 + tid;
  const double v = i < n ? x[i] : 0.0;
  stage[tid] = v;
  __syncwarp();
  const double neighbour = stage[tid ^ 1];
  __syncwarp();
  const double r = __shfl_sync(kFull, v, ((tid & 31) + 5) & 31);
  const long long d = __shfl_down_sync(kFull, static_cast<long long>(i) << 33, 1);
  if (i < n) {
    swapped[i] = neighbour;
    rotated[i] = r;
    down[i] = d;
  }
}

// Lanes 8..15 read lanes 16..23, which are not in the mask.
__global__ void shuffle_outside_mask_kernel(float* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, 1.0f, 8);
}

__global__ void reduced_precision_kernel(const float* x, unsigned short* half_bits, unsigned short* bf16_bits,
                                         float* back, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half h = __float2half_rn(x[i]);
  const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
  half_bits[i] = __half_as_ushort(h);
  bf16_bits[i] = __bfloat16_as_ushort(b);
  back[2 * i] = __half2float(h);
  back[2 * i + 1] = __bfloat162float(b);
}

}  // namespace

extern const int kSyncwarpBadMaskLine = __LINE__ + 2;
__global__ void syncwarp_bad_mask_kernel(int* out) {
  __syncwarp(threadIdx.x == 0 ? 0xfffffffeu : kFull);
  out[threadIdx.x] = 1;
}

extern const int kOutOfBoundsLine = __LINE__ + 3;
__global__ void out_of_bounds_kernel(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i % n] = x[i];  // no bounds check on x
}

extern const int kDivergentBarrierLineA = __LINE__ + 4;
extern const int kDivergentBarrierLineB = __LINE__ + 5;
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

extern const int kEarlyExitBarrierLine = __LINE__ + 3;
__global__ void early_exit_barrier_kernel(int* out) {
  if (threadIdx.x >= 40) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

extern const int kBadMaskLine = __LINE__ + 2;
__global__ void bad_mask_kernel(float* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1.0f, 0);
}

extern const int kMismatchedMaskLine = __LINE__ + 3;
__global__ void mismatched_masks_kernel(float* out) {
  const unsigned mask = threadIdx.x < 16 ? 0x0000ffffu : kFull;
  out[threadIdx.x] = __shfl_sync(mask, 1.0f, 0);
}

extern const int kMissingLaneLine = __LINE__ + 3;
__global__ void missing_lane_kernel(float* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1);
  } else {
    __syncthreads();
  }
}

// nvcc rejects this kernel when it compiles it (ptxas: too much shared data); the emulator when it runs.
#if CNN_SIMT_EMULATED
__global__ void too_much_static_shared_kernel(float* out) {
  CNN_SHARED(float, big, [13 * 1024]);
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}
#endif

// Recursion is legal CUDA, but nvcc cannot size its stack statically and says so; emulator only.
#if CNN_SIMT_EMULATED
__device__ float deep_recursion(int depth, float seed) {
  volatile float local[256];
  local[depth % 256] = seed;
  return depth == 0 ? local[0] : deep_recursion(depth - 1, seed + 1.0f) + local[depth % 256];
}

__global__ void stack_overflow_kernel(float* out, int depth) { out[threadIdx.x] = deep_recursion(depth, 1.0f); }
#endif

__global__ void config_kernel(float* out) {
  CNN_DYNAMIC_SHARED(float, buf);
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    buf[0] = 2.0f;
    out[0] = buf[0];
  }
}

cudaError_t run_block_reduce(const float* x, int n, float* block_sums, int grid, int block) {
  switch (block) {
    case 64: return CNN_LAUNCH(block_reduce_kernel<64>, grid, 64, 0, 0, x, n, block_sums);
    case 128: return CNN_LAUNCH(block_reduce_kernel<128>, grid, 128, 0, 0, x, n, block_sums);
    case 256: return CNN_LAUNCH(block_reduce_kernel<256>, grid, 256, 0, 0, x, n, block_sums);
  }
  return cudaErrorInvalidValue;
}

cudaError_t run_block_reduce_missing_sync(const float* x, int n, float* block_sums, int grid) {
  return CNN_LAUNCH(block_reduce_missing_sync_kernel, grid, 128, 0, 0, x, n, block_sums);
}

cudaError_t run_shift(const float* x, float* y, int n, bool with_sync) {
  return CNN_LAUNCH(shift_kernel, (n + 63) / 64, 64, 0, 0, x, y, n, with_sync);
}

cudaError_t run_warp_reduce(const float* x, int n, float* out, int grid, int block) {
  return CNN_LAUNCH(warp_reduce_kernel, grid, block, 0, 0, x, n, out);
}

cudaError_t run_warp_allreduce(const float* x, float* y, int n, int width) {
  return CNN_LAUNCH(warp_allreduce_kernel, (n + 127) / 128, 128, 0, 0, x, y, n, width);
}

cudaError_t run_warp_scan(const int* x, int* y, int* y2, int n, int width) {
  return CNN_LAUNCH(warp_scan_kernel, 1, (n + 31) / 32 * 32, 0, 0, x, y, y2, n, width);
}

cudaError_t run_votes(const int* x, int n, unsigned* ballot, int* any, int* all) {
  return CNN_LAUNCH(votes_kernel, 1, (n + 31) / 32 * 32, 0, 0, x, n, ballot, any, all);
}

cudaError_t run_block_votes(const int* x, int n, int* counts, int grid, int block) {
  return CNN_LAUNCH(block_votes_kernel, grid, block, 0, 0, x, n, counts);
}

cudaError_t run_atomics(const int* x, int n, int nbins, AtomicOut out, int grid, int block) {
  return CNN_LAUNCH(atomics_kernel, grid, block, 0, 0, x, n, nbins, out);
}

cudaError_t run_reverse_dynamic(const float* x, float* y, int n, int block, size_t shmem_bytes) {
  return CNN_LAUNCH(reverse_dynamic_kernel, (n + block - 1) / block, block, shmem_bytes, 0, x, y, n);
}

cudaError_t run_index3d(unsigned* out, dim3 grid, dim3 block) {
  return CNN_LAUNCH(index3d_kernel, grid, block, 0, 0, out);
}

cudaError_t run_saxpy(int n, float a, const float* x, float* y, int grid, int block) {
  return CNN_LAUNCH(saxpy_kernel, grid, block, 0, 0, n, a, x, y);
}

cudaError_t run_block_sum_helper(const float* x, float* y, int n, int block) {
  return CNN_LAUNCH(block_sum_kernel, (n + block - 1) / block, block, 0, 0, x, y, n);
}

cudaError_t run_read_uninit_shared(float* out, int block) {
  return CNN_LAUNCH(read_uninit_shared_kernel, 1, block, 0, 0, out);
}

cudaError_t run_warp_exchange(const double* x, double* swapped, double* rotated, long long* down, int n) {
  return CNN_LAUNCH(warp_exchange_kernel, (n + 63) / 64, 64, 0, 0, x, swapped, rotated, down, n);
}

cudaError_t run_shuffle_outside_mask(float* out) {
  return CNN_LAUNCH(shuffle_outside_mask_kernel, 1, 32, 0, 0, out);
}

cudaError_t run_reduced_precision(const float* x, unsigned short* half_bits, unsigned short* bf16_bits,
                                  float* back, int n) {
  return CNN_LAUNCH(reduced_precision_kernel, (n + 63) / 64, 64, 0, 0, x, half_bits, bf16_bits, back, n);
}

cudaError_t run_syncwarp_bad_mask(int* out) { return CNN_LAUNCH(syncwarp_bad_mask_kernel, 1, 32, 0, 0, out); }
cudaError_t run_out_of_bounds(const float* x, float* y, int n, int threads) {
  return CNN_LAUNCH(out_of_bounds_kernel, 1, threads, 0, 0, x, y, n);
}
cudaError_t run_divergent_barrier(int* out) { return CNN_LAUNCH(divergent_barrier_kernel, 1, 64, 0, 0, out); }
cudaError_t run_early_exit_barrier(int* out) { return CNN_LAUNCH(early_exit_barrier_kernel, 1, 64, 0, 0, out); }
cudaError_t run_bad_mask(float* out) { return CNN_LAUNCH(bad_mask_kernel, 1, 32, 0, 0, out); }
cudaError_t run_mismatched_masks(float* out) { return CNN_LAUNCH(mismatched_masks_kernel, 1, 32, 0, 0, out); }
cudaError_t run_missing_lane(float* out) { return CNN_LAUNCH(missing_lane_kernel, 1, 32, 0, 0, out); }
cudaError_t run_too_much_static_shared(float* out) {
#if CNN_SIMT_EMULATED
  return CNN_LAUNCH(too_much_static_shared_kernel, 1, 32, 0, 0, out);
#else
  return cudaErrorNotSupported;
#endif
}

cudaError_t run_stack_overflow(float* out, int depth) {
#if CNN_SIMT_EMULATED
  return CNN_LAUNCH(stack_overflow_kernel, 1, 32, 0, 0, out, depth);
#else
  return cudaErrorNotSupported;
#endif
}

cudaError_t run_config(dim3 grid, dim3 block, size_t shmem_bytes, float* out) {
  return CNN_LAUNCH(config_kernel, grid, block, shmem_bytes, 0, out);
}

cudaError_t opt_in_dynamic_shared(int bytes) {
  return cudaFuncSetAttribute(config_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
