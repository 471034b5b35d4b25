// The GEMM of convolution and linear ops with 16-bit operands on tensor cores: C[m, n] = sum_k A(m, k) B(k, n)
// with the loaders and stores of gemm_tile.cuh. A block of 8 warps computes a 64x64 tile of C: the loaders
// fill shared-memory tiles of A (64 x 16) and B (16 x 64) in the 16-bit storage type, each warp multiplies its
// 32x16 piece as two wmma m16n16k16 fragments with fp32 accumulators, and the accumulators leave through
// shared memory to the store functor (bias and rounding, or fp32 atomics for split-K weight gradients).
// launch_gemm() picks this kernel for 16-bit operands unless the portable SIMT tile kernel is selected
// (GpuOptions::tensor_core_gemm false, or CNNTRAIN_CUDA_GEMM=simt), and gemm_tile_kernel for fp32. The SIMT emulator
// runs the same source through its wmma implementation (kernels/simt/simt_wmma.h).
#pragma once
#include <type_traits>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_tile.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

constexpr int kWmmaTile = 64, kWmmaK = 16, kWmmaThreads = 256;
// The loads follow gemm_tile_kernel's pattern (4 per thread and operand, every load of a thread at the same k),
// so the loaders' per-row and per-k-tile address arithmetic is shared with it.
static_assert(kWmmaTile == kTileM && kWmmaK == kTileK && kWmmaThreads == kTileThreads, "TileLoads' pattern");

// A as [m][k] (matrix_a, row-major) and B as [n][k] (matrix_b, column-major): both written with k fastest, as
// the loaders deliver it. Rows are padded by 16 bytes (8 16-bit or 4 float elements), which shifts successive
// rows across banks and keeps every fragment pointer 32-byte aligned and ldm a multiple of 16 bytes, as wmma
// requires.
template <class T>
struct WmmaTiles {
  alignas(32) T a[kWmmaTile][kWmmaK + 8];         // A(m0 + i, kt + j)
  alignas(32) T b[kWmmaTile][kWmmaK + 8];         // B(kt + j, n0 + i)
  alignas(32) float c[kWmmaTile][kWmmaTile + 4];  // the block's accumulators, for the epilogue
};

// 64x64 tile of C per block of 8 warps; warp w computes rows 32*(w/4) .. +32 and columns 16*(w%4) .. +16 as two
// 16x16 accumulator fragments. blockIdx.z selects a slice of the reduction (split-K), as in gemm_tile_kernel.
// The explicit minimum of one block per multiprocessor matters: without it ptxas held one sm_90 variant to
// 64 registers and spilled.
template <class T, class LoadA, class LoadB, class Store>
__global__ void __launch_bounds__(kWmmaThreads, 1)
    gemm_wmma_kernel(int M, int N, int K, int k_chunk, LoadA load_a, LoadB load_b, Store store) {
  namespace wmma = nvcuda::wmma;
  using Tiles = WmmaTiles<T>;
  CNN_SHARED(Tiles, sm, );
  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = (warp / 4) * 32, wn = (warp % 4) * 16;
  const int m0 = blockIdx.x * kWmmaTile, n0 = blockIdx.y * kWmmaTile;
  const int k_begin = blockIdx.z * k_chunk;
  const int k_end = min(K, k_begin + k_chunk);
  const TileLoads<LoadA, LoadB> loads(load_a, load_b, tid, m0, n0, M, N);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  for (int i = 0; i < 2; ++i) wmma::fill_fragment(acc[i], 0.f);
  for (int kt = k_begin; kt < k_end; kt += kWmmaK) {
    loads.load(load_a, load_b, tid, kt, k_begin, k_end, [&](int mm, int kk, float a, float b) {
      sm.a[mm][kk] = narrow<T>(a);
      sm.b[mm][kk] = narrow<T>(b);
    });
    __syncthreads();
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
    wmma::load_matrix_sync(b, &sm.b[wn][0], kWmmaK + 8);
    for (int i = 0; i < 2; ++i) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, &sm.a[wm + 16 * i][0], kWmmaK + 8);
      wmma::mma_sync(acc[i], a, b, acc[i]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    wmma::store_matrix_sync(&sm.c[wm + 16 * i][wn], acc[i], kWmmaTile + 4, wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < kWmmaTile * kWmmaTile; e += kWmmaThreads) {
    const int mm = e / kWmmaTile, nn = e % kWmmaTile;
    if (m0 + mm < M && n0 + nn < N) store(m0 + mm, n0 + nn, sm.c[mm][nn]);
  }
}

// Launches gemm_wmma_kernel on gemm_grid's grid (split-K as for launch_gemm_tile).
template <class T, class LoadA, class LoadB, class Store>
cudaError_t launch_gemm_wmma(int M, int N, int K, bool split_k, LoadA load_a, LoadB load_b, Store store,
                             cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return cudaSuccess;
  const GemmGrid g = gemm_grid(M, N, K, kWmmaTile, kWmmaTile, kWmmaK, split_k, stream);
  auto* kernel = &gemm_wmma_kernel<T, LoadA, LoadB, Store>;
  return CNN_LAUNCH(kernel, g.blocks, dim3(kWmmaThreads), 0, stream, M, N, K, g.k_chunk, load_a, load_b, store);
}

// The GEMM every convolution and linear op runs; the loaders' storage type picks the kernel.
template <class LoadA, class LoadB, class Store>
cudaError_t launch_gemm(int M, int N, int K, bool split_k, LoadA load_a, LoadB load_b, Store store,
                        cudaStream_t stream) {
  using T = typename LoadA::Storage;
  static_assert(std::is_same<T, typename LoadB::Storage>::value, "both operands in one storage type");
  if constexpr (!std::is_same<T, float>::value)
    if (kernel_settings(stream).tensor_cores) return launch_gemm_wmma<T>(M, N, K, split_k, load_a, load_b, store, stream);
  return launch_gemm_tile(M, N, K, split_k, load_a, load_b, store, stream);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
