// The shared-memory tiled GEMM behind linear layers and implicit-GEMM convolution:
//   C[m, n] = sum_k A(m, k) * B(k, n)   for m < M, n < N, k < K
// A and B are read through loader functors, so a convolution reads its im2col patches straight from the
// NHWC activation (zero outside the image) instead of materialising them, and a transposed operand is just
// another index mapping. Results leave through a store functor (bias, overwrite, or atomic accumulate for
// split-K weight gradients). Included by kernels/*_cuda.cu only.
#pragma once
#include "kernels/cuda_common.h"

namespace cnn {
namespace CNN_CUDA_NS {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kTileThreads = 256;
// The index arithmetic below assumes these: square tiles loaded with one shared loop, 16x16 threads of
// 4x4 accumulators, whole loads per thread.
static_assert(kTileM == kTileN && kTileM == 16 * 4 && kTileThreads == 16 * 16, "tile shape");
static_assert(kTileM * kTileK % kTileThreads == 0, "tile loads");

// 64x64 output tile per block of 256 threads, 4x4 accumulators per thread. A thread's rows and columns are
// strided by 16 so that the 16 threads of a row group read 16 consecutive shared words (no bank conflicts)
// and each A value is a broadcast. The +4 padding keeps the transposed tile stores off a single bank.
// blockIdx.z selects a slice [z*k_chunk, (z+1)*k_chunk) of the reduction (split-K).
template <class LoadA, class LoadB, class Store>
__global__ void __launch_bounds__(kTileThreads)
    gemm_tile_kernel(int M, int N, int K, int k_chunk, LoadA load_a, LoadB load_b, Store store) {
  CNN_SHARED(float, a_tile, [kTileK][kTileM + 4]);
  CNN_SHARED(float, b_tile, [kTileK][kTileN + 4]);
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.x * kTileM, n0 = blockIdx.y * kTileN;
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int kt = k_begin; kt < k_end; kt += kTileK) {
    // k runs fastest across threads: it is the contiguous index of NHWC patches and row-major operands.
CNN_UNROLL
    for (int i = 0; i < kTileM * kTileK / kTileThreads; ++i) {
      const int e = tid + i * kTileThreads;
      const int kk = e % kTileK, mm = e / kTileK;
      const int k = kt + kk;
      a_tile[kk][mm] = (k < k_end && m0 + mm < M) ? load_a(m0 + mm, k) : 0.f;
      b_tile[kk][mm] = (k < k_end && n0 + mm < N) ? load_b(k, n0 + mm) : 0.f;
    }
    __syncthreads();
CNN_UNROLL
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
CNN_UNROLL
      for (int i = 0; i < 4; ++i) {
        a[i] = a_tile[kk][ty + 16 * i];
        b[i] = b_tile[kk][tx + 16 * i];
      }
CNN_UNROLL
      for (int i = 0; i < 4; ++i)
CNN_UNROLL
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
CNN_UNROLL
  for (int i = 0; i < 4; ++i)
CNN_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < M && n < N) store(m, n, acc[i][j]);
    }
}

// Plain operands: element (r, c) of a row-major matrix with leading dimension ld, or of its transpose.
struct RowMajor {
  const float* p;
  int ld;
  __device__ float operator()(int r, int c) const { return p[static_cast<size_t>(r) * ld + c]; }
};
struct Transposed {
  const float* p;
  int ld;
  __device__ float operator()(int r, int c) const { return p[static_cast<size_t>(c) * ld + r]; }
};

// y[m, n] = acc + bias[n] (bias nullable).
struct StoreBias {
  float* y;
  int ld;
  const float* bias;
  __device__ void operator()(int m, int n, float acc) const {
    y[static_cast<size_t>(m) * ld + n] = acc + (bias ? bias[n] : 0.f);
  }
};
// y[m, n] += acc, atomically: several split-K blocks add to the same element.
struct StoreAccumulate {
  float* y;
  int ld;
  __device__ void operator()(int m, int n, float acc) const { atomicAdd(&y[static_cast<size_t>(m) * ld + n], acc); }
};

// Launches gemm_tile_kernel. With split_k (accumulating stores only) a long reduction over few output tiles
// (weight gradients: K = batch * output pixels) is cut into slices so that the device fills up.
template <class LoadA, class LoadB, class Store>
cudaError_t launch_gemm_tile(int M, int N, int K, bool split_k, LoadA load_a, LoadB load_b, Store store,
                             cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return cudaSuccess;
  const int tiles_m = (M + kTileM - 1) / kTileM, tiles_n = (N + kTileN - 1) / kTileN;
  const int k_tiles = (K + kTileK - 1) / kTileK;
  int splits = 1;
  if (split_k) {
    const int want = 2 * multiprocessor_count() / (tiles_m * tiles_n);
    const int most = k_tiles / 4;  // keep at least 4 k-tiles per slice so the atomics stay a small share
    splits = want < most ? want : most;
    if (splits < 1) splits = 1;
  }
  const int k_chunk = (k_tiles + splits - 1) / splits * kTileK;
  const int slices = (K + k_chunk - 1) / k_chunk;
  auto* kernel = &gemm_tile_kernel<LoadA, LoadB, Store>;
  return CNN_LAUNCH(kernel, dim3(tiles_m, tiles_n, slices), dim3(kTileThreads), 0, stream, M, N, K, k_chunk, load_a,
                    load_b, store);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
