// Batch normalisation over the channel dimension of x: [rows, c] (NHWC, rows = n*h*w), the kernels for the
// layer set of the layer/zoo issue (CPU reference: kernels/batchnorm_cpu.cpp there). Per-channel sums are
// block reductions over a (32 channels x 8 row lanes) block whose grid rows split the rows; the partial sums
// meet in double atomicAdds. The variance takes a second pass over (x - mean)^2, as the reference does: the
// one-pass E[x^2] - E[x]^2 loses the variance of channels with a large mean.
#include "kernels/cuda_dtype.cuh"
#include "kernels/cuda_ops.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kCols = 32, kRowLanes = 8, kBlock = 256;

struct SumPair {
  double a, b;
};

// Per-channel sums of two quantities f(i, j) -> (a, b) for element i of channel j; sum_b may be null.
template <class F>
__global__ void __launch_bounds__(kCols * kRowLanes)
    channel_sums_kernel(int rows, int c, F f, double* __restrict__ sum_a, double* __restrict__ sum_b) {
  CNN_SHARED(double, part_a, [kRowLanes][kCols]);
  CNN_SHARED(double, part_b, [kRowLanes][kCols]);
  const int j = blockIdx.x * kCols + threadIdx.x;
  double a = 0.0, b = 0.0;
  if (j < c)
    for (int r = blockIdx.y * kRowLanes + threadIdx.y; r < rows; r += gridDim.y * kRowLanes) {
      const SumPair v = f(static_cast<size_t>(r) * c + j, j);
      a += v.a;
      b += v.b;
    }
  part_a[threadIdx.y][threadIdx.x] = a;
  part_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && j < c) {
    for (int i = 1; i < kRowLanes; ++i) {
      a += part_a[i][threadIdx.x];
      b += part_b[i][threadIdx.x];
    }
    atomicAdd(&sum_a[j], a);
    if (sum_b) atomicAdd(&sum_b[j], b);
  }
}

// T: the storage type of x, y, dy and dx (cuda_dtype.cuh); statistics in fp32/double.
template <class T>
struct SumX {
  const T* x;
  __device__ SumPair operator()(size_t i, int) const { return {widen(x[i]), 0.0}; }
};
template <class T>
struct SumSquaredDeviation {  // mean = sum / rows from the first pass
  const T* x;
  const double* sum;
  double inv_rows;
  __device__ SumPair operator()(size_t i, int j) const {
    const double d = widen(x[i]) - sum[j] * inv_rows;
    return {d * d, 0.0};
  }
};
template <class T>
struct BackwardSums {  // (dy, dy * xhat)
  const T* x;
  const T* dy;
  const float* mean;
  const float* invstd;
  __device__ SumPair operator()(size_t i, int j) const {
    const float g = widen(dy[i]);
    const double xhat = (widen(x[i]) - mean[j]) * static_cast<double>(invstd[j]);
    return {g, g * xhat};
  }
};

template <class F>
cudaError_t channel_sums(int rows, int c, F f, double* sum_a, double* sum_b, cudaStream_t stream) {
  const int grid_x = (c + kCols - 1) / kCols;
  int grid_y = (rows + 32 * kRowLanes - 1) / (32 * kRowLanes);  // >= 32 rows per lane before the atomics
  const int cap = 4 * multiprocessor_count() / grid_x;
  if (grid_y > cap) grid_y = cap;
  auto* kernel = &channel_sums_kernel<F>;
  return CNN_LAUNCH(kernel, dim3(grid_x, reduction_blocks(grid_y)), dim3(kCols, kRowLanes), 0, stream, rows, c, f, sum_a, sum_b);
}

// Training statistics from the sums: saved mean/invstd, running statistics, and the per-channel affine
// map y = x * scale + shift (in double, rounded once, as the reference).
__global__ void batchnorm_finalize_train_kernel(int rows, int c, const double* __restrict__ sum,
                                                const double* __restrict__ sum_sq, const float* __restrict__ gamma,
                                                const float* __restrict__ beta, float eps, float momentum,
                                                float* __restrict__ save_mean, float* __restrict__ save_invstd,
                                                float* __restrict__ running_mean, float* __restrict__ running_var,
                                                float* __restrict__ scale, float* __restrict__ shift) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    const double mean = sum[j] / rows, biased = sum_sq[j] / rows;
    const double invstd = 1.0 / sqrt(biased + eps);
    save_mean[j] = static_cast<float>(mean);
    save_invstd[j] = static_cast<float>(invstd);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    shift[j] = static_cast<float>(beta[j] - mean * gamma[j] * invstd);
    const double unbiased = rows > 1 ? sum_sq[j] / (rows - 1) : biased;
    running_mean[j] = static_cast<float>((1.0 - momentum) * running_mean[j] + momentum * mean);
    running_var[j] = static_cast<float>((1.0 - momentum) * running_var[j] + momentum * unbiased);
  }
}

__global__ void batchnorm_finalize_infer_kernel(int c, const float* __restrict__ gamma, const float* __restrict__ beta,
                                                const float* __restrict__ running_mean,
                                                const float* __restrict__ running_var, float eps,
                                                float* __restrict__ scale, float* __restrict__ shift) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    const double invstd = 1.0 / sqrt(static_cast<double>(running_var[j]) + eps);
    scale[j] = static_cast<float>(gamma[j] * invstd);
    shift[j] = static_cast<float>(beta[j] - running_mean[j] * gamma[j] * invstd);
  }
}

template <class T>
__global__ void batchnorm_apply_kernel(size_t total, int c, const T* __restrict__ x, const float* __restrict__ scale,
                                       const float* __restrict__ shift, T* __restrict__ y) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(i % c);
    y[i] = narrow<T>(widen(x[i]) * scale[j] + shift[j]);
  }
}

// dgamma += sum(dy * xhat), dbeta += sum(dy); k = gamma * invstd and the two means for dx.
__global__ void batchnorm_finalize_backward_kernel(int rows, int c, const double* __restrict__ sum_dy,
                                                   const double* __restrict__ sum_dyx, const float* __restrict__ gamma,
                                                   const float* __restrict__ invstd, float* __restrict__ dgamma,
                                                   float* __restrict__ dbeta, float* __restrict__ k,
                                                   float* __restrict__ mean_dy, float* __restrict__ mean_dyx) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    dgamma[j] += static_cast<float>(sum_dyx[j]);
    dbeta[j] += static_cast<float>(sum_dy[j]);
    k[j] = gamma[j] * invstd[j];
    mean_dy[j] = static_cast<float>(sum_dy[j] / rows);
    mean_dyx[j] = static_cast<float>(sum_dyx[j] / rows);
  }
}

// dx = gamma*invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
template <class T>
__global__ void batchnorm_backward_data_kernel(size_t total, int c, const T* __restrict__ x, const T* __restrict__ dy,
                                               const float* __restrict__ mean, const float* __restrict__ invstd,
                                               const float* __restrict__ k, const float* __restrict__ mean_dy,
                                               const float* __restrict__ mean_dyx, T* __restrict__ dx) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(i % c);
    const float xhat = (widen(x[i]) - mean[j]) * invstd[j];
    dx[i] = narrow<T>(k[j] * (widen(dy[i]) - mean_dy[j] - xhat * mean_dyx[j]));
  }
}

// Workspace layout: two double sums per channel, then up to three float vectors per channel.
struct Work {
  double* a;
  double* b;
  float* f0;
  float* f1;
  float* f2;
};
Work carve(void* d_work, int c) {
  double* d = static_cast<double*>(d_work);
  float* f = reinterpret_cast<float*>(d + 2 * static_cast<size_t>(c));
  return {d, d + c, f, f + c, f + 2 * static_cast<size_t>(c)};
}

int channel_blocks(int c) { return (c + kBlock - 1) / kBlock; }

template <class T>
cudaError_t batchnorm_forward_train_t(int rows, int c, const T* d_x, const float* d_gamma, const float* d_beta,
                                      float eps, float momentum, T* d_y, float* d_save_mean, float* d_save_invstd,
                                      float* d_running_mean, float* d_running_var, void* d_work, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = cudaMemsetAsync(d_work, 0, 2 * sizeof(double) * c, stream);
  if (err == cudaSuccess) err = channel_sums(rows, c, SumX<T>{d_x}, w.a, nullptr, stream);
  if (err == cudaSuccess)
    err = channel_sums(rows, c, SumSquaredDeviation<T>{d_x, w.a, 1.0 / rows}, w.b, nullptr, stream);
  if (err == cudaSuccess)
    err = CNN_LAUNCH(batchnorm_finalize_train_kernel, channel_blocks(c), kBlock, 0, stream, rows, c, w.a, w.b,
                     d_gamma, d_beta, eps, momentum, d_save_mean, d_save_invstd, d_running_mean, d_running_var,
                     w.f0, w.f1);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* apply = &batchnorm_apply_kernel<T>;
  if (err == cudaSuccess)
    err = CNN_LAUNCH(apply, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, w.f0, w.f1, d_y);
  return err;
}

template <class T>
cudaError_t batchnorm_forward_infer_t(int rows, int c, const T* d_x, const float* d_gamma, const float* d_beta,
                                      const float* d_running_mean, const float* d_running_var, float eps, T* d_y,
                                      void* d_work, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = CNN_LAUNCH(batchnorm_finalize_infer_kernel, channel_blocks(c), kBlock, 0, stream, c, d_gamma,
                               d_beta, d_running_mean, d_running_var, eps, w.f0, w.f1);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* apply = &batchnorm_apply_kernel<T>;
  if (err == cudaSuccess)
    err = CNN_LAUNCH(apply, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, w.f0, w.f1, d_y);
  return err;
}

template <class T>
cudaError_t batchnorm_backward_t(int rows, int c, const T* d_x, const T* d_dy, const float* d_gamma,
                                 const float* d_save_mean, const float* d_save_invstd, T* d_dx, float* d_dgamma,
                                 float* d_dbeta, void* d_work, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = cudaMemsetAsync(d_work, 0, 2 * sizeof(double) * c, stream);
  if (err == cudaSuccess)
    err = channel_sums(rows, c, BackwardSums<T>{d_x, d_dy, d_save_mean, d_save_invstd}, w.a, w.b, stream);
  if (err == cudaSuccess)
    err = CNN_LAUNCH(batchnorm_finalize_backward_kernel, channel_blocks(c), kBlock, 0, stream, rows, c, w.a, w.b,
                     d_gamma, d_save_invstd, d_dgamma, d_dbeta, w.f0, w.f1, w.f2);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* data = &batchnorm_backward_data_kernel<T>;
  if (err == cudaSuccess && d_dx)
    err = CNN_LAUNCH(data, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, d_dy, d_save_mean,
                     d_save_invstd, w.f0, w.f1, w.f2, d_dx);
  return err;
}

}  // namespace

size_t batchnorm_work_bytes(int c) { return static_cast<size_t>(c) * (2 * sizeof(double) + 3 * sizeof(float)); }

cudaError_t batchnorm_forward_train_cuda(int rows, int c, const float* d_x, const float* d_gamma, const float* d_beta,
                                         float eps, float momentum, float* d_y, float* d_save_mean,
                                         float* d_save_invstd, float* d_running_mean, float* d_running_var,
                                         void* d_work, cudaStream_t stream) {
  return batchnorm_forward_train_t(rows, c, d_x, d_gamma, d_beta, eps, momentum, d_y, d_save_mean, d_save_invstd,
                                   d_running_mean, d_running_var, d_work, stream);
}

cudaError_t batchnorm_forward_infer_cuda(int rows, int c, const float* d_x, const float* d_gamma, const float* d_beta,
                                         const float* d_running_mean, const float* d_running_var, float eps, float* d_y,
                                         void* d_work, cudaStream_t stream) {
  return batchnorm_forward_infer_t(rows, c, d_x, d_gamma, d_beta, d_running_mean, d_running_var, eps, d_y, d_work,
                                   stream);
}

cudaError_t batchnorm_backward_cuda(int rows, int c, const float* d_x, const float* d_dy, const float* d_gamma,
                                    const float* d_save_mean, const float* d_save_invstd, float* d_dx, float* d_dgamma,
                                    float* d_dbeta, void* d_work, cudaStream_t stream) {
  return batchnorm_backward_t(rows, c, d_x, d_dy, d_gamma, d_save_mean, d_save_invstd, d_dx, d_dgamma, d_dbeta,
                              d_work, stream);
}

cudaError_t batchnorm_forward_train_cuda(DType t, int rows, int c, const void* d_x, const float* d_gamma,
                                         const float* d_beta, float eps, float momentum, void* d_y,
                                         float* d_save_mean, float* d_save_invstd, float* d_running_mean,
                                         float* d_running_var, void* d_work, cudaStream_t stream) {
  return dispatch_16(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_forward_train_t(rows, c, static_cast<const T*>(d_x), d_gamma, d_beta, eps, momentum,
                                     static_cast<T*>(d_y), d_save_mean, d_save_invstd, d_running_mean, d_running_var,
                                     d_work, stream);
  });
}

cudaError_t batchnorm_forward_infer_cuda(DType t, int rows, int c, const void* d_x, const float* d_gamma,
                                         const float* d_beta, const float* d_running_mean,
                                         const float* d_running_var, float eps, void* d_y, void* d_work,
                                         cudaStream_t stream) {
  return dispatch_16(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_forward_infer_t(rows, c, static_cast<const T*>(d_x), d_gamma, d_beta, d_running_mean,
                                     d_running_var, eps, static_cast<T*>(d_y), d_work, stream);
  });
}

cudaError_t batchnorm_backward_cuda(DType t, int rows, int c, const void* d_x, const void* d_dy,
                                    const float* d_gamma, const float* d_save_mean, const float* d_save_invstd,
                                    void* d_dx, float* d_dgamma, float* d_dbeta, void* d_work, cudaStream_t stream) {
  return dispatch_16(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_backward_t(rows, c, static_cast<const T*>(d_x), static_cast<const T*>(d_dy), d_gamma,
                                d_save_mean, d_save_invstd, static_cast<T*>(d_dx), d_dgamma, d_dbeta, d_work,
                                stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
