// Fully connected layers as tiled matmuls (gemm_tile.cuh), plus the column sums that give bias gradients.
//   forward        y[m, n]  = x[m, :] . w[n, :] + b[n]
//   backward-data  dx[m, k] = sum_n dy[m, n] w[n, k]
//   backward-wt    dw[n, k] += sum_m dy[m, n] x[m, k]   (split-K over the batch, atomic accumulate)
#include "kernels/cuda_ops.h"
#include "kernels/gemm_tile.cuh"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kSumCols = 32, kSumRows = 8;

// Block (32, 8): 32 columns, 8 row lanes striding over the rows this block's grid row covers; the 8
// partial sums meet in shared memory, then one atomicAdd per column and block (grid.y blocks share a column).
__global__ void __launch_bounds__(kSumCols * kSumRows)
    column_sum_kernel(int rows, int cols, const float* __restrict__ x, float* __restrict__ sums) {
  CNN_SHARED(float, partial, [kSumRows][kSumCols + 1]);
  const int col = blockIdx.x * kSumCols + threadIdx.x;
  float acc = 0.f;
  if (col < cols)
    for (int r = blockIdx.y * kSumRows + threadIdx.y; r < rows; r += gridDim.y * kSumRows)
      acc += x[static_cast<size_t>(r) * cols + col];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.f;
    for (int i = 0; i < kSumRows; ++i) total += partial[i][threadIdx.x];
    atomicAdd(&sums[col], total);
  }
}

}  // namespace

cudaError_t column_sum_cuda(int rows, int cols, const float* d_x, float* d_sums, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int grid_x = (cols + kSumCols - 1) / kSumCols;
  // Enough row blocks to fill the device, each still summing a good run of rows before its atomic.
  int grid_y = (rows + 16 * kSumRows - 1) / (16 * kSumRows);
  const int cap = 4 * multiprocessor_count() / grid_x;
  if (grid_y > cap) grid_y = cap;
  return CNN_LAUNCH(column_sum_kernel, dim3(grid_x, reduction_blocks(grid_y)), dim3(kSumCols, kSumRows), 0, stream, rows, cols, d_x,
                    d_sums);
}

cudaError_t linear_forward_cuda(int m, int k, int n, const float* d_x, const float* d_w, const float* d_b,
                                float* d_y, cudaStream_t stream) {
  return launch_gemm_tile(m, n, k, false, MatRows{d_x, k}, MatRows{d_w, k}, StoreBias{d_y, n, d_b}, stream);
}

cudaError_t linear_backward_data_cuda(int m, int k, int n, const float* d_dy, const float* d_w, float* d_dx,
                                      cudaStream_t stream) {
  return launch_gemm_tile(m, k, n, false, MatRows{d_dy, n}, MatCols{d_w, k}, StoreBias{d_dx, k, nullptr}, stream);
}

cudaError_t linear_backward_weight_cuda(int m, int k, int n, const float* d_x, const float* d_dy, float* d_dw,
                                        float* d_db, cudaStream_t stream) {
  cudaError_t err = launch_gemm_tile(n, k, m, true, MatCols{d_dy, n}, MatCols{d_x, k},
                                     StoreAccumulate{d_dw, k}, stream);
  if (err == cudaSuccess && d_db) err = column_sum_cuda(m, n, d_dy, d_db, stream);
  return err;
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
