// Softmax cross-entropy with label smoothing, forward and backward in one pass: one warp per row, warp
// shuffles for the row's max/arg-max and sums, then a block reduction so each block issues one atomicAdd
// for the loss sum and one for the correct count. The mixed-batch loss (softmax_xent_mix_cuda) is the same
// kernel with the soft target of two labels.
#include <climits>

#include "kernels/cuda/cuda_dtype.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/mix_images.h"

namespace cnn {
namespace CNN_CUDA_NS {

namespace {

constexpr int kWarps = 4;
constexpr unsigned kFullMask = 0xffffffffu;

// T: the storage type of logits and dlogits (cuda_dtype.cuh); softmax and loss in fp32. mix: null, or the
// rows' mixing draws (kernels/loss.h: softmax_xent_mix_cpu's target).
template <class T>
__global__ void __launch_bounds__(kWarps * 32)
    softmax_xent_kernel(int n, int classes, const T* __restrict__ logits, const int32_t* __restrict__ labels,
                        const MixDraw* __restrict__ mix, float eps, float scale, T* __restrict__ dlogits,
                        double* __restrict__ loss_sum, unsigned long long* __restrict__ correct) {
  CNN_SHARED(double, warp_loss, [kWarps]);
  CNN_SHARED(unsigned, warp_correct, [kWarps]);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float off = eps / classes, on = 1.f - eps + off;
  double my_loss = 0.0;  // lane 0's running sums over this warp's rows
  unsigned my_correct = 0;
  // The row loop is warp-uniform, so full-mask shuffles inside it are legal.
  for (int row = blockIdx.x * kWarps + warp; row < n; row += gridDim.x * kWarps) {
    const T* z = logits + static_cast<size_t>(row) * classes;
    float best = -INFINITY;
    int arg = INT_MAX;
    for (int j = lane; j < classes; j += 32)
      if (arg == INT_MAX || widen(z[j]) > best) {
        best = widen(z[j]);
        arg = j;
      }
    // Arg-max across lanes, lowest index on ties: the CPU reference's "first maximum".
    for (int m = 16; m > 0; m >>= 1) {
      const float ob = __shfl_xor_sync(kFullMask, best, m);
      const int oa = __shfl_xor_sync(kFullMask, arg, m);
      if (oa != INT_MAX && (arg == INT_MAX || ob > best || (ob == best && oa < arg))) {
        best = ob;
        arg = oa;
      }
    }
    float sum = 0.f;
    for (int j = lane; j < classes; j += 32) sum += expf(widen(z[j]) - best);
    for (int m = 16; m > 0; m >>= 1) sum += __shfl_xor_sync(kFullMask, sum, m);
    const float lse = best + logf(sum);
    const int y = labels[row];
    const float lam = mix ? mix[row].lam : 1.f;
    const int y2 = mix ? mix[row].partner_label : y;
    // loss = sum_j t_j (lse - z_j) with the smoothed one-hot target t, or lam of it and 1 - lam of y2's.
    float loss = 0.f;
    for (int j = lane; j < classes; j += 32) {
      const float t = mix ? off + (1.f - eps) * (lam * (j == y) + (1.f - lam) * (j == y2)) : (j == y ? on : off);
      const float zj = widen(z[j]);
      loss += t * (lse - zj);
      if (dlogits) dlogits[static_cast<size_t>(row) * classes + j] = narrow<T>(scale * (expf(zj - lse) - t));
    }
    for (int m = 16; m > 0; m >>= 1) loss += __shfl_xor_sync(kFullMask, loss, m);
    my_loss += loss;
    my_correct += arg == y;
  }
  if (lane == 0) {
    warp_loss[warp] = my_loss;
    warp_correct[warp] = my_correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0.0;
    unsigned c = 0;
    for (int w = 0; w < kWarps; ++w) {
      l += warp_loss[w];
      c += warp_correct[w];
    }
    atomicAdd(loss_sum, l);
    atomicAdd(correct, static_cast<unsigned long long>(c));
  }
}

template <class T>
cudaError_t softmax_xent_t(int n, int classes, const T* d_logits, const int32_t* d_labels, const MixDraw* d_mix,
                           float eps, float scale, T* d_dlogits, double* d_loss_sum, unsigned long long* d_correct,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  int grid = (n + kWarps - 1) / kWarps;
  const int cap = 8 * multiprocessor_count();
  if (grid > cap) grid = cap;
  auto* kernel = &softmax_xent_kernel<T>;
  return CNN_LAUNCH(kernel, reduction_blocks(grid, stream), kWarps * 32, 0, stream, n, classes, d_logits, d_labels,
                    d_mix, eps, scale, d_dlogits, d_loss_sum, d_correct);
}

}  // namespace

cudaError_t softmax_xent_cuda(DType t, int n, int classes, const void* d_logits, const int32_t* d_labels, float eps,
                              float scale, void* d_dlogits, double* d_loss_sum, unsigned long long* d_correct,
                              cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return softmax_xent_t(n, classes, static_cast<const T*>(d_logits), d_labels, nullptr, eps, scale,
                          static_cast<T*>(d_dlogits), d_loss_sum, d_correct, stream);
  });
}

cudaError_t softmax_xent_mix_cuda(DType t, int n, int classes, const void* d_logits, const int32_t* d_labels,
                                  const MixDraw* d_mix, float eps, float scale, void* d_dlogits, double* d_loss_sum,
                                  unsigned long long* d_correct, cudaStream_t stream) {
  return dispatch(t, [&](auto* tag) {
    using T = StorageOf<decltype(tag)>;
    return softmax_xent_t(n, classes, static_cast<const T*>(d_logits), d_labels, d_mix, eps, scale,
                          static_cast<T*>(d_dlogits), d_loss_sum, d_correct, stream);
  });
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn
