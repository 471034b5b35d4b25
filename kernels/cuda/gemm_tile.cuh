// The shared-memory tiled GEMM behind linear layers and implicit-GEMM convolution:
//   C[m, n] = sum_k A(m, k) * B(k, n)   for m < M, n < N, k < K
// A and B are read through loader functors, so a convolution reads its im2col patches straight from the
// NHWC activation (zero outside the image) instead of materialising them, and a transposed operand is just
// another index mapping. Results leave through a store functor (bias, overwrite, or atomic accumulate for
// split-K weight gradients). Included by kernels/cuda/*.cu only.
//
// Loader protocol. An operand element is addressed by its outer index (m of A, n of B) and its inner
// (reduction) index k. A loader splits the address arithmetic along that line:
//   Outer outer(int o) const;                  once per thread and operand row, before the k loop
//   Inner inner(int k) const;                  once per thread and k-tile: every load of a thread in one
//                                              k-tile has the same k (the tile loads keep k = tid % 16)
//   float at(const Outer&, const Inner&) const;
//   using Storage = T;                         the element type in memory: float, or a 16-bit type that at()
//                                              widens (cuda_dtype.cuh); gemm_wmma.cuh picks the kernel by it
// so the divisions that turn a flat index into (n, p, q) or (r, s, c) run once per row and once per k-tile
// instead of once per element, and use precomputed reciprocals (FastDiv) instead of the division sequence.
#pragma once
#include "kernels/cuda/cuda_dtype.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kTileThreads = 256;
// The index arithmetic below assumes these: square tiles loaded with one shared loop, 16x16 threads of
// 4x4 accumulators, whole loads per thread, and every load of a thread at the same k.
static_assert(kTileM == kTileN && kTileM == 16 * 4 && kTileThreads == 16 * 16, "tile shape");
static_assert(kTileM * kTileK % kTileThreads == 0 && kTileThreads % kTileK == 0, "tile loads");
constexpr int kLoadsPerThread = kTileM * kTileK / kTileThreads;

// x / d and x % d for 0 <= x < 2^31 and a divisor d >= 1 fixed at launch: q = (umulhi(x, mul) + x) >> shift
// with shift = ceil(log2 d) and mul = floor(2^32 (2^shift - d) / d) + 1 (Granlund and Montgomery's
// round-up method; x < 2^31 keeps the sum within 32 bits). Three instructions instead of the ~20 of an
// integer division; checked against / and % in tests/unit/test_fast_div.cpp.
struct FastDiv {
  int d = 1;
  unsigned mul = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(int divisor) : d(divisor) {
    while ((1u << shift) < static_cast<unsigned>(d)) ++shift;
    mul = static_cast<unsigned>(((1ull << 32) * ((1ull << shift) - d)) / d + 1);
  }
  __host__ __device__ __forceinline__ int div(int x) const {
    const unsigned hi = static_cast<unsigned>((static_cast<unsigned long long>(x) * mul) >> 32);  // umulhi
    return static_cast<int>((hi + static_cast<unsigned>(x)) >> shift);
  }
  // Quotient and remainder.
  __host__ __device__ __forceinline__ int divmod(int x, int& rem) const {
    const int q = div(x);
    rem = x - q * d;
    return q;
  }
};

// The tile loads of one thread, shared by the SIMT and tensor-core GEMM kernels: load i goes to operand row
// mm_i = (tid + i * kTileThreads) / kTileK, inner index kk = tid % kTileK (k runs fastest across threads: it is
// the contiguous index of NHWC patches and row-major operands), so every load of a thread in one k-tile has
// the same k. The rows' address parts are resolved once, before the k loop.
template <class LoadA, class LoadB>
struct TileLoads {
  typename LoadA::Outer a_row[kLoadsPerThread];
  typename LoadB::Outer b_row[kLoadsPerThread];
  bool a_in[kLoadsPerThread], b_in[kLoadsPerThread];
  int kk;

  __device__ TileLoads(const LoadA& load_a, const LoadB& load_b, int tid, int m0, int n0, int M, int N)
      : kk(tid % kTileK) {
CNN_UNROLL
    for (int i = 0; i < kLoadsPerThread; ++i) {
      const int mm = row(tid, i);
      a_in[i] = m0 + mm < M;
      b_in[i] = n0 + mm < N;
      a_row[i] = load_a.outer(a_in[i] ? m0 + mm : 0);
      b_row[i] = load_b.outer(b_in[i] ? n0 + mm : 0);
    }
  }
  __device__ static int row(int tid, int i) { return (tid + i * kTileThreads) / kTileK; }
  // put(mm, kk, a, b) for each load of k-tile kt: A(m0 + mm, kt + kk) and B(kt + kk, n0 + mm), zero outside
  // the matrices and past k_end.
  template <class Put>
  __device__ void load(const LoadA& load_a, const LoadB& load_b, int tid, int kt, int k_begin, int k_end,
                       Put put) const {
    const int k = kt + kk;
    const bool k_in = k < k_end;
    const typename LoadA::Inner a_k = load_a.inner(k_in ? k : k_begin);
    const typename LoadB::Inner b_k = load_b.inner(k_in ? k : k_begin);
CNN_UNROLL
    for (int i = 0; i < kLoadsPerThread; ++i)
      put(row(tid, i), kk, (k_in && a_in[i]) ? load_a.at(a_row[i], a_k) : 0.f,
          (k_in && b_in[i]) ? load_b.at(b_row[i], b_k) : 0.f);
  }
};

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
  const TileLoads<LoadA, LoadB> loads(load_a, load_b, tid, m0, n0, M, N);
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int kt = k_begin; kt < k_end; kt += kTileK) {
    loads.load(load_a, load_b, tid, kt, k_begin, k_end, [&](int mm, int kk, float a, float b) {
      a_tile[kk][mm] = a;
      b_tile[kk][mm] = b;
    });
    __syncthreads();
CNN_UNROLL
    for (int q = 0; q < kTileK; ++q) {
      float a[4], b[4];
CNN_UNROLL
      for (int i = 0; i < 4; ++i) {
        a[i] = a_tile[q][ty + 16 * i];
        b[i] = b_tile[q][tx + 16 * i];
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

// Plain matrix operands of a row-major matrix p with leading dimension ld, elements of type T:
// MatRows: element (outer o, inner k) = p[o * ld + k]  (the reduction runs along a row);
// MatCols: element (outer o, inner k) = p[k * ld + o]  (the reduction runs down a column).
template <class T>
struct MatRows {
  const T* p;
  int ld;
  using Storage = T;
  using Outer = const T*;
  using Inner = int;
  __device__ Outer outer(int o) const { return p + static_cast<size_t>(o) * ld; }
  __device__ Inner inner(int k) const { return k; }
  __device__ float at(Outer row, Inner k) const { return widen(row[k]); }
};
template <class T>
MatRows(const T*, int) -> MatRows<T>;
template <class T>
struct MatCols {
  const T* p;
  int ld;
  using Storage = T;
  using Outer = const T*;
  using Inner = size_t;
  __device__ Outer outer(int o) const { return p + o; }
  __device__ Inner inner(int k) const { return static_cast<size_t>(k) * ld; }
  __device__ float at(Outer col, Inner off) const { return widen(col[off]); }
};
template <class T>
MatCols(const T*, int) -> MatCols<T>;

// y[m, n] = acc + bias[n] (bias nullable, fp32), rounded once to y's type.
template <class T>
struct StoreBias {
  T* y;
  int ld;
  const float* bias;
  __device__ void operator()(int m, int n, float acc) const {
    y[static_cast<size_t>(m) * ld + n] = narrow<T>(acc + (bias ? bias[n] : 0.f));
  }
};
template <class T>
StoreBias(T*, int, const float*) -> StoreBias<T>;
// y[m, n] += acc, atomically: several split-K blocks add to the same element.
struct StoreAccumulate {
  float* y;
  int ld;
  __device__ void operator()(int m, int n, float acc) const { atomicAdd(&y[static_cast<size_t>(m) * ld + n], acc); }
};

// The grid of a tiled GEMM (tile_m x tile_n output tiles, k-tiles of tile_k) and the reduction length of each
// grid slice. With split_k (accumulating stores only) a long reduction over few output tiles (weight gradients:
// K = batch * output pixels) is cut into slices so that the device fills up. Under the stream's deterministic
// setting (KernelSettings, cuda_common.h) the reduction is not split: each output element then gets exactly one
// atomicAdd, so the result does not depend on the order in which blocks finish.
struct GemmGrid {
  dim3 blocks;
  int k_chunk;
};
inline GemmGrid gemm_grid(int M, int N, int K, int tile_m, int tile_n, int tile_k, bool split_k,
                          cudaStream_t stream) {
  const int tiles_m = (M + tile_m - 1) / tile_m, tiles_n = (N + tile_n - 1) / tile_n;
  const int k_tiles = (K + tile_k - 1) / tile_k;
  int splits = 1;
  if (split_k && !kernel_settings(stream).deterministic) {
    const int want = 2 * multiprocessor_count() / (tiles_m * tiles_n);
    const int most = k_tiles / 4;  // keep at least 4 k-tiles per slice so the atomics stay a small share
    splits = want < most ? want : most;
    if (splits < 1) splits = 1;
  }
  const int k_chunk = (k_tiles + splits - 1) / splits * tile_k;
  return {dim3(tiles_m, tiles_n, (K + k_chunk - 1) / k_chunk), k_chunk};
}

// Launches gemm_tile_kernel on gemm_grid's grid.
template <class LoadA, class LoadB, class Store>
cudaError_t launch_gemm_tile(int M, int N, int K, bool split_k, LoadA load_a, LoadB load_b, Store store,
                             cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0) return cudaSuccess;
  const GemmGrid g = gemm_grid(M, N, K, kTileM, kTileN, kTileK, split_k, stream);
  auto* kernel = &gemm_tile_kernel<LoadA, LoadB, Store>;
  return CNN_LAUNCH(kernel, g.blocks, dim3(kTileThreads), 0, stream, M, N, K, g.k_chunk, load_a, load_b, store);
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
