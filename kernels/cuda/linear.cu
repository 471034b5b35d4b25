// Fully connected layers as tiled matmuls (gemm_tile.cuh), plus the column sums that give bias gradients.
//   forward        y[m, n]  = x[m, :] . w[n, :] + b[n]
//   backward-data  dx[m, k] = sum_n dy[m, n] w[n, k]
//   backward-wt    dw[n, k] += sum_m dy[m, n] x[m, k]   (split-K over the batch, atomic accumulate)
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_wmma.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kSumCols = 32, kSumRows = 8;

// Block (32, 8): 32 columns, 8 row lanes striding over the rows this block's grid row covers; the 8
// partial sums meet in shared memory, then one atomicAdd per column and block (grid.y blocks share a column).
// T: the storage type of x (cuda_dtype.cuh); sums in fp32.
template <class T>
__global__ void __launch_bounds__(kSumCols * kSumRows)
    column_sum_kernel(int rows, int cols, const T* __restrict__ x, float* __restrict__ sums) {
  CNN_SHARED(float, partial, [kSumRows][kSumCols + 1]);
  const int col = blockIdx.x * kSumCols + threadIdx.x;
  float acc = 0.f;
  if (col < cols)
    for (int r = blockIdx.y * kSumRows + threadIdx.y; r < rows; r += gridDim.y * kSumRows)
      acc += widen(x[static_cast<size_t>(r) * cols + col]);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.f;
    for (int i = 0; i < kSumRows; ++i) total += partial[i][threadIdx.x];
    atomicAdd(&sums[col], total);
  }
}

template <class T>
cudaError_t column_sum_t(int rows, int cols, const T* d_x, float* d_sums, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int grid_x = (cols + kSumCols - 1) / kSumCols;
  // Enough row blocks to fill the device, each still summing a good run of rows before its atomic.
  int grid_y = (rows + 16 * kSumRows - 1) / (16 * kSumRows);
  const int cap = 4 * multiprocessor_count() / grid_x;
  if (grid_y > cap) grid_y = cap;
  auto* kernel = &column_sum_kernel<T>;
  return CNN_LAUNCH(kernel, dim3(grid_x, reduction_blocks(grid_y, stream)), dim3(kSumCols, kSumRows), 0, stream, rows, cols,
                    d_x, d_sums);
}

template <class T>
cudaError_t linear_forward_t(int m, int k, int n, const T* d_x, const T* d_w, const float* d_b, T* d_y,
                             cudaStream_t stream) {
  return launch_gemm(m, n, k, false, MatRows<T>{d_x, k}, MatRows<T>{d_w, k}, StoreBias<T>{d_y, n, d_b}, stream);
}

template <class T>
cudaError_t linear_backward_data_t(int m, int k, int n, const T* d_dy, const T* d_w, T* d_dx, cudaStream_t stream) {
  return launch_gemm(m, k, n, false, MatRows<T>{d_dy, n}, MatCols<T>{d_w, k}, StoreBias<T>{d_dx, k, nullptr},
                     stream);
}

template <class T>
cudaError_t linear_backward_weight_t(int m, int k, int n, const T* d_x, const T* d_dy, float* d_dw, float* d_db,
                                     cudaStream_t stream) {
  cudaError_t err = launch_gemm(n, k, m, true, MatCols<T>{d_dy, n}, MatCols<T>{d_x, k},
                                StoreAccumulate{d_dw, k}, stream);
  if (err == cudaSuccess && d_db) err = column_sum_t(m, n, d_dy, d_db, stream);
  return err;
}

}  // namespace

cudaError_t column_sum_cuda(DType t, int rows, int cols, const void* d_x, float* d_sums, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    return column_sum_t(rows, cols, static_cast<const StorageOf<decltype(tag)>*>(d_x), d_sums, stream);
  });
}

cudaError_t linear_forward_cuda(DType t, int m, int k, int n, const void* d_x, const void* d_w, const float* d_b,
                                void* d_y, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return linear_forward_t(m, k, n, static_cast<const T*>(d_x), static_cast<const T*>(d_w), d_b,
                            static_cast<T*>(d_y), stream);
  });
}

cudaError_t linear_backward_data_cuda(DType t, int m, int k, int n, const void* d_dy, const void* d_w, void* d_dx,
                                      cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return linear_backward_data_t(m, k, n, static_cast<const T*>(d_dy), static_cast<const T*>(d_w),
                                  static_cast<T*>(d_dx), stream);
  });
}

cudaError_t linear_backward_weight_cuda(DType t, int m, int k, int n, const void* d_x, const void* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return linear_backward_weight_t(m, k, n, static_cast<const T*>(d_x), static_cast<const T*>(d_dy), d_dw, d_db,
                                    stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
