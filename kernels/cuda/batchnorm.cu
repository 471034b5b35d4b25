// Batch normalisation over the channel dimension of x: [rows, c] (NHWC, rows = n*h*w), with the fused
// residual add and ReLU of kernels/batchnorm.h (CPU reference: kernels/batchnorm_cpu.cpp). Per-channel sums are
// block reductions over a (32 channels x 8 row lanes) block whose grid rows split the rows; the partial sums
// meet in double atomicAdds. The variance takes a second pass over (x - mean)^2, as the reference does: the
// one-pass E[x^2] - E[x]^2 loses the variance of channels with a large mean. The synchronised variants at the
// end take their statistics from sums added up across ranks (kernels/batchnorm_sync.h); they run on fp32 only.
#include "kernels/batchnorm_sync.h"
#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"

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
// The gradient reaching the normalisation: dy, masked by the fused ReLU's bits when mask is given.
template <class T>
__device__ inline float masked_grad(const uint32_t* mask, const T* dy, size_t i) {
  return mask && !(mask[i / 32] >> (i % 32) & 1u) ? 0.f : widen(dy[i]);
}

template <class T>
struct BackwardSums {  // (g, g * xhat), g = masked dy
  const T* x;
  const uint32_t* mask;  // null: no ReLU
  const T* dy;
  const float* mean;
  const float* invstd;
  __device__ SumPair operator()(size_t i, int j) const {
    const double xhat = (widen(x[i]) - mean[j]) * static_cast<double>(invstd[j]);
    const float g = masked_grad(mask, dy, i);
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
  return CNN_LAUNCH(kernel, dim3(grid_x, reduction_blocks(grid_y, stream)), dim3(kCols, kRowLanes), 0, stream, rows, c, f,
                    sum_a, sum_b);
}

// Training statistics from the sums: saved mean/invstd, running statistics, and the per-channel affine
// map y = x * scale + shift (in double, rounded once, as the reference).
__global__ void batchnorm_finalize_train_kernel(int rows, int c, const double* __restrict__ sum,
                                                const double* __restrict__ sum_sq, const float* __restrict__ gamma,
                                                const float* __restrict__ beta, float eps, float momentum,
                                                float* __restrict__ save_mean, float* __restrict__ save_invstd,
                                                float* __restrict__ running_mean, float* __restrict__ running_var,
                                                float* __restrict__ scale, float* __restrict__ shift) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x)
    batchnorm_finalize(rows, sum[j] / rows, sum_sq[j] / rows, gamma[j], beta[j], eps, momentum, &save_mean[j],
                       &save_invstd[j], &running_mean[j], &running_var[j], &scale[j], &shift[j]);
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

// y = act(x * scale + shift + residual); residual nullable; the sum in fp32, y rounded once to T; act: ReLU when
// `relu`, capped at `cap` when `capped` as well (BnAct). With a ReLU and a mask, bit i % 32 of mask[i / 32] records
// that the ReLU passes the gradient (the fp32 value is > 0, and < cap when capped): each warp covers 32 consecutive
// elements per iteration (all lanes iterate together, so the ballot sees the whole warp) and its first lane stores the
// word.
template <class T>
__global__ void __launch_bounds__(kBlock)
    batchnorm_apply_kernel(size_t total, int c, const T* __restrict__ x, const T* __restrict__ residual,
                           const float* __restrict__ scale, const float* __restrict__ shift, bool relu,
                           bool capped, float cap, T* __restrict__ y, uint32_t* __restrict__ mask) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const unsigned lane = threadIdx.x % 32;
  for (size_t base = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x - lane; base < total;
       base += stride) {
    const size_t i = base + lane;
    bool positive = false;
    if (i < total) {
      const int j = static_cast<int>(i % c);
      float v = widen(x[i]) * scale[j] + shift[j];
      if (residual) v += widen(residual[i]);
      positive = v > 0.f;
      if (relu) v = positive ? v : 0.f;
      if (capped && v >= cap) {
        v = cap;
        positive = false;
      }
      y[i] = narrow<T>(v);
    }
    if (mask) {
      const unsigned bits = __ballot_sync(0xffffffffu, positive);
      if (lane == 0) mask[base / 32] = bits;
    }
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

// dx = gamma*invstd * (g - mean(g) - xhat * mean(g * xhat)), g = masked dy; dresidual = g. Either nullable.
template <class T>
__global__ void batchnorm_backward_data_kernel(size_t total, int c, const T* __restrict__ x,
                                               const uint32_t* __restrict__ mask, const T* __restrict__ dy,
                                               const float* __restrict__ mean, const float* __restrict__ invstd,
                                               const float* __restrict__ k, const float* __restrict__ mean_dy,
                                               const float* __restrict__ mean_dyx, T* __restrict__ dx,
                                               T* __restrict__ dresidual) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(i % c);
    const float g = masked_grad(mask, dy, i);
    if (dresidual) dresidual[i] = narrow<T>(g);
    if (dx) {
      const float xhat = (widen(x[i]) - mean[j]) * invstd[j];
      dx[i] = narrow<T>(k[j] * (g - mean_dy[j] - xhat * mean_dyx[j]));
    }
  }
}

struct SumXAndSquare {
  const float* x;
  __device__ SumPair operator()(size_t i, int) const {
    const double v = x[i];
    return {v, v * v};
  }
};

__global__ void store_count_kernel(double* __restrict__ count, int rows) { *count = rows; }

// Synchronised batch norm: the statistics of `stats` (sums over stats[2c] rows) instead of this batch's.
__global__ void batchnorm_finalize_from_stats_kernel(int c, const double* __restrict__ stats,
                                                     const float* __restrict__ gamma, const float* __restrict__ beta,
                                                     float eps, float momentum, float* __restrict__ save_mean,
                                                     float* __restrict__ save_invstd,
                                                     float* __restrict__ running_mean,
                                                     float* __restrict__ running_var, float* __restrict__ scale,
                                                     float* __restrict__ shift) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x)
    batchnorm_finalize_channel(j, c, stats, gamma, beta, eps, momentum, save_mean, save_invstd, running_mean,
                               running_var, scale, shift);
}

// Synchronised batch norm: this rank's share of dgamma/dbeta, the global means for dx.
__global__ void batchnorm_finalize_from_sums_kernel(int c, const double* __restrict__ local,
                                                    const double* __restrict__ global, const float* __restrict__ gamma,
                                                    const float* __restrict__ invstd, float* __restrict__ dgamma,
                                                    float* __restrict__ dbeta, float* __restrict__ k,
                                                    float* __restrict__ mean_dy, float* __restrict__ mean_dyx) {
  const double count = global[2 * c];
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < c; j += gridDim.x * blockDim.x) {
    dgamma[j] += static_cast<float>(local[c + j]);
    dbeta[j] += static_cast<float>(local[j]);
    k[j] = gamma[j] * invstd[j];
    mean_dy[j] = static_cast<float>(global[j] / count);
    mean_dyx[j] = static_cast<float>(global[c + j] / count);
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
cudaError_t batchnorm_forward_train_t(int rows, int c, const T* d_x, const T* d_residual, const float* d_gamma,
                                      const float* d_beta, float eps, float momentum, BnAct act, T* d_y,
                                      uint32_t* d_relu_mask, float* d_save_mean, float* d_save_invstd,
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
    err = CNN_LAUNCH(apply, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, d_residual, w.f0,
                     w.f1, act.relu, act.capped, act.cap, d_y, act.relu ? d_relu_mask : nullptr);
  return err;
}

template <class T>
cudaError_t batchnorm_forward_infer_t(int rows, int c, const T* d_x, const T* d_residual, const float* d_gamma,
                                      const float* d_beta, const float* d_running_mean, const float* d_running_var,
                                      float eps, BnAct act, T* d_y, void* d_work, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = CNN_LAUNCH(batchnorm_finalize_infer_kernel, channel_blocks(c), kBlock, 0, stream, c, d_gamma,
                               d_beta, d_running_mean, d_running_var, eps, w.f0, w.f1);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* apply = &batchnorm_apply_kernel<T>;
  if (err == cudaSuccess)
    err = CNN_LAUNCH(apply, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, d_residual, w.f0,
                     w.f1, act.relu, act.capped, act.cap, d_y, static_cast<uint32_t*>(nullptr));
  return err;
}

template <class T>
cudaError_t batchnorm_backward_t(int rows, int c, const T* d_x, const uint32_t* d_relu_mask, const T* d_dy,
                                 const float* d_gamma, const float* d_save_mean, const float* d_save_invstd, T* d_dx,
                                 T* d_dresidual, float* d_dgamma, float* d_dbeta, void* d_work, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = cudaMemsetAsync(d_work, 0, 2 * sizeof(double) * c, stream);
  if (err == cudaSuccess)
    err = channel_sums(rows, c, BackwardSums<T>{d_x, d_relu_mask, d_dy, d_save_mean, d_save_invstd}, w.a, w.b,
                       stream);
  if (err == cudaSuccess)
    err = CNN_LAUNCH(batchnorm_finalize_backward_kernel, channel_blocks(c), kBlock, 0, stream, rows, c, w.a, w.b,
                     d_gamma, d_save_invstd, d_dgamma, d_dbeta, w.f0, w.f1, w.f2);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* data = &batchnorm_backward_data_kernel<T>;
  if (err == cudaSuccess && (d_dx || d_dresidual))
    err = CNN_LAUNCH(data, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x, d_relu_mask, d_dy,
                     d_save_mean, d_save_invstd, w.f0, w.f1, w.f2, d_dx, d_dresidual);
  return err;
}

}  // namespace

size_t batchnorm_work_bytes(int c) { return static_cast<size_t>(c) * (2 * sizeof(double) + 3 * sizeof(float)); }

namespace {

// Zeroes the 2c sums and stores the row count after them; the caller adds the sums.
cudaError_t start_sums(int rows, int c, double* d_sums, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(d_sums, 0, 2 * sizeof(double) * c, stream);
  if (err == cudaSuccess) err = CNN_LAUNCH(store_count_kernel, 1, 1, 0, stream, d_sums + 2 * c, rows);
  return err;
}

}  // namespace

cudaError_t batchnorm_stats_cuda(int rows, int c, const float* d_x, double* d_stats, cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  cudaError_t err = start_sums(rows, c, d_stats, stream);
  if (err == cudaSuccess && rows > 0) err = channel_sums(rows, c, SumXAndSquare{d_x}, d_stats, d_stats + c, stream);
  return err;
}

cudaError_t batchnorm_forward_from_stats_cuda(int rows, int c, const float* d_x, const double* d_stats,
                                              const float* d_gamma, const float* d_beta, float eps, float momentum,
                                              float* d_y, float* d_save_mean, float* d_save_invstd,
                                              float* d_running_mean, float* d_running_var, void* d_work,
                                              cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = CNN_LAUNCH(batchnorm_finalize_from_stats_kernel, channel_blocks(c), kBlock, 0, stream, c, d_stats,
                               d_gamma, d_beta, eps, momentum, d_save_mean, d_save_invstd, d_running_mean,
                               d_running_var, w.f0, w.f1);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* apply = &batchnorm_apply_kernel<float>;
  if (err == cudaSuccess && total > 0)
    err = CNN_LAUNCH(apply, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x,
                     static_cast<const float*>(nullptr), w.f0, w.f1, false, false, 0.f, d_y,
                     static_cast<uint32_t*>(nullptr));
  return err;
}

cudaError_t batchnorm_backward_sums_cuda(int rows, int c, const float* d_x, const float* d_dy,
                                         const float* d_save_mean, const float* d_save_invstd, double* d_sums,
                                         cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  cudaError_t err = start_sums(rows, c, d_sums, stream);
  if (err == cudaSuccess && rows > 0)
    err = channel_sums(rows, c, BackwardSums<float>{d_x, nullptr, d_dy, d_save_mean, d_save_invstd}, d_sums,
                       d_sums + c, stream);
  return err;
}

cudaError_t batchnorm_backward_from_sums_cuda(int rows, int c, const float* d_x, const float* d_dy,
                                              const float* d_gamma, const float* d_save_mean,
                                              const float* d_save_invstd, const double* d_local,
                                              const double* d_global, float* d_dx, float* d_dgamma, float* d_dbeta,
                                              void* d_work, cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  const Work w = carve(d_work, c);
  cudaError_t err = CNN_LAUNCH(batchnorm_finalize_from_sums_kernel, channel_blocks(c), kBlock, 0, stream, c, d_local,
                               d_global, d_gamma, d_save_invstd, d_dgamma, d_dbeta, w.f0, w.f1, w.f2);
  const size_t total = static_cast<size_t>(rows) * c;
  auto* data = &batchnorm_backward_data_kernel<float>;
  if (err == cudaSuccess && d_dx && total > 0)
    err = CNN_LAUNCH(data, grid_stride_blocks(total, kBlock), kBlock, 0, stream, total, c, d_x,
                     static_cast<const uint32_t*>(nullptr), d_dy, d_save_mean, d_save_invstd, w.f0, w.f1, w.f2, d_dx,
                     static_cast<float*>(nullptr));
  return err;
}

cudaError_t batchnorm_forward_train_cuda(DType t, int rows, int c, const void* d_x, const void* d_residual,
                                         const float* d_gamma, const float* d_beta, float eps, float momentum,
                                         BnAct act, void* d_y, uint32_t* d_relu_mask, float* d_save_mean,
                                         float* d_save_invstd, float* d_running_mean, float* d_running_var,
                                         void* d_work, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_forward_train_t(rows, c, static_cast<const T*>(d_x), static_cast<const T*>(d_residual), d_gamma,
                                     d_beta, eps, momentum, act, static_cast<T*>(d_y), d_relu_mask, d_save_mean,
                                     d_save_invstd, d_running_mean, d_running_var, d_work, stream);
  });
}

cudaError_t batchnorm_forward_infer_cuda(DType t, int rows, int c, const void* d_x, const void* d_residual,
                                         const float* d_gamma, const float* d_beta, const float* d_running_mean,
                                         const float* d_running_var, float eps, BnAct act, void* d_y, void* d_work,
                                         cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_forward_infer_t(rows, c, static_cast<const T*>(d_x), static_cast<const T*>(d_residual), d_gamma,
                                     d_beta, d_running_mean, d_running_var, eps, act, static_cast<T*>(d_y), d_work,
                                     stream);
  });
}

cudaError_t batchnorm_backward_cuda(DType t, int rows, int c, const void* d_x, const uint32_t* d_relu_mask,
                                    const void* d_dy, const float* d_gamma, const float* d_save_mean,
                                    const float* d_save_invstd, void* d_dx, void* d_dresidual, float* d_dgamma,
                                    float* d_dbeta, void* d_work, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return batchnorm_backward_t(rows, c, static_cast<const T*>(d_x), d_relu_mask, static_cast<const T*>(d_dy),
                                d_gamma, d_save_mean, d_save_invstd, static_cast<T*>(d_dx),
                                static_cast<T*>(d_dresidual), d_dgamma, d_dbeta, d_work, stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
