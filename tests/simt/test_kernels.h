// Host entry points of the SIMT emulator's test kernels (tests/simt/test_kernels.cu). The same .cu builds
// with nvcc (make simt-nvcc-check) and with g++ against the emulator (make test-simt). Every function
// launches with CNN_LAUNCH and returns its result; all pointers are device pointers.
#pragma once
#include "kernels/simt/cuda_compat.h"

// block_sums[b] = sum of the x[i] that block b visits in a grid-stride loop; shared-memory tree reduction
// with __syncthreads. block is 64, 128 or 256 (a template parameter of the kernel).
cudaError_t run_block_reduce(const float* x, int n, float* block_sums, int grid, int block);
// Planted bug: the reduction without the __syncthreads inside its loop.
cudaError_t run_block_reduce_missing_sync(const float* x, int n, float* block_sums, int grid);
// y[i] = x[i - 1] of the same block (0 for the first thread), staged through shared memory. The planted bug
// has no __syncthreads between the store and the load: right in index order, wrong under other orders.
cudaError_t run_shift(const float* x, float* y, int n, bool with_sync);
// out[0] += sum of x over a warp-shuffle reduction per warp plus atomicAdd; block size a multiple of 32.
cudaError_t run_warp_reduce(const float* x, int n, float* out, int grid, int block);
// Every element of y gets the sum over its warp's segment of `width` lanes (butterfly with __shfl_xor_sync).
cudaError_t run_warp_allreduce(const float* x, float* y, int n, int width);
// Inclusive prefix sum within segments of `width` lanes (__shfl_up_sync), plus y2[i] = x of the segment's
// first lane (__shfl_sync broadcast). n threads in one block.
cudaError_t run_warp_scan(const int* x, int* y, int* y2, int n, int width);
// Per warp w: ballot[w], any[w], all[w] of x[i] != 0 over all lanes (n threads, one block, ragged tail
// handled with a ballot-derived mask).
cudaError_t run_votes(const int* x, int n, unsigned* ballot, int* any, int* all);
// Per block b (of `grid`, block size `block`): counts[b*3 + {0,1,2}] = __syncthreads_count/and/or of x != 0.
cudaError_t run_block_votes(const int* x, int n, int* counts, int grid, int block);
// Histogram of x into nbins with atomicAdd(int), plus sums (float, double), max/min (int), count
// (unsigned), and the first thread to CAS `*owner` from -1 to its global index.
struct AtomicOut {
  int* hist;
  float* fsum;
  double* dsum;
  int* imax;
  int* imin;
  unsigned* ucount;
  int* owner;
  int* exch;
};
cudaError_t run_atomics(const int* x, int n, int nbins, AtomicOut out, int grid, int block);
// y = reverse of x within each block of `block` threads, staged through dynamic shared memory.
cudaError_t run_reverse_dynamic(const float* x, float* y, int n, int block, size_t shmem_bytes);
// Marks out[linear id] += 1 from a 3-D grid of 3-D blocks; out has grid.x*grid.y*grid.z*block threads.
cudaError_t run_index3d(unsigned* out, dim3 grid, dim3 block);
// y = a*x + y over a grid-stride loop.
cudaError_t run_saxpy(int n, float a, const float* x, float* y, int grid, int block);
// y[i] = block-wide sum of x over the block containing i, through a __device__ helper that keeps per-warp
// partials in static shared memory; ragged n.
cudaError_t run_block_sum_helper(const float* x, float* y, int n, int block);
// Blocks of 64 over n: swapped[i] = x[i ^ 1] through shared memory and __syncwarp, rotated[i] = x of lane
// (lane + 5) % 32 of the same warp (double shuffle), down[i] = (i + 1) << 33, or i << 33 for lane 31.
cudaError_t run_warp_exchange(const double* x, double* swapped, double* rotated, long long* down, int n);
// out[0..15] = __shfl_down_sync(0x0000ffff, 1.0f, 8): lanes 8..15 name sources outside the mask.
cudaError_t run_shuffle_outside_mask(float* out);
// Bit patterns of x rounded to __half and __nv_bfloat16, and back[2i], back[2i+1] = those values as float.
cudaError_t run_reduced_precision(const float* x, unsigned short* half_bits, unsigned short* bf16_bits,
                                  float* back, int n);
// out[t] = an element of a shared array that no thread wrote (must read back as NaN).
cudaError_t run_read_uninit_shared(float* out, int block);

// Planted bugs the emulator must report (as launch errors naming the given source lines).
extern const int kDivergentBarrierLineA, kDivergentBarrierLineB, kEarlyExitBarrierLine, kBadMaskLine,
    kMismatchedMaskLine, kMissingLaneLine, kSyncwarpBadMaskLine, kOutOfBoundsLine;
// Reads x[i] for i < threads without checking i < n (caught only by an AddressSanitizer build).
cudaError_t run_out_of_bounds(const float* x, float* y, int n, int threads);
cudaError_t run_divergent_barrier(int* out);
cudaError_t run_early_exit_barrier(int* out);  // some threads return before a __syncthreads
cudaError_t run_bad_mask(float* out);
cudaError_t run_syncwarp_bad_mask(int* out);  // lane 0 passes a __syncwarp mask without itself          // lanes call __shfl_sync with a mask that omits them
cudaError_t run_mismatched_masks(float* out);  // half the warp passes 0x0000ffff, the other half all lanes
cudaError_t run_missing_lane(float* out);      // lanes named in the mask never reach the shuffle
cudaError_t run_too_much_static_shared(float* out);
// Recursion `depth` deep with 1 KiB per frame: fine for small depths, overflows the 64 KiB fiber stack for
// large ones (emulator only).
cudaError_t run_stack_overflow(float* out, int depth);
// Plain launches with a given configuration, for the configuration checks.
cudaError_t run_config(dim3 grid, dim3 block, size_t shmem_bytes, float* out);
cudaError_t opt_in_dynamic_shared(int bytes);
