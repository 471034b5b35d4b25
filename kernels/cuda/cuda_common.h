// Shared by every CUDA source (kernels/cuda/*.cu, the backend): the toolchain switch, error checks and
// launch sizing. Each .cu is compiled twice, by nvcc for the GPU and by g++ against the SIMT emulator
// (kernels/simt/); both builds can sit in one binary, so everything they define lives in CNN_CUDA_NS:
// cnn::gpu for nvcc, cnn::emu for the emulator.
#pragma once
#include "kernels/simt/cuda_compat.h"

#if CNN_SIMT_EMULATED
#define CNN_CUDA_NS emu
#define CNN_UNROLL  // g++ unrolls on its own and warns about nvcc's pragma
#else
#define CNN_CUDA_NS gpu
#define CNN_UNROLL _Pragma("unroll")
#endif

#include <cstddef>

namespace cnn {
namespace CNN_CUDA_NS {

// Ends the job through cnn::fatal with the expression, file:line, the CUDA error text and, under the
// emulator, the emulator's full report (which names the kernel source line).
[[noreturn]] void cuda_failed(const char* expr, cudaError_t err, const char* file, int line);

// Multiprocessors of the current device (the emulator reports 4 unless told otherwise, see simt.h); sizes
// grid-stride launches and split-K.
int multiprocessor_count();

// How the custom kernels launched on a stream compute. Kept per stream, i.e. per backend (GpuOptions), not
// per process, so that backends with different settings in one process (the tests make several) keep their
// own: the CUDA backend registers its compute stream; any other stream (a test's own) gets the defaults.
struct KernelSettings {
  // --deterministic: reductions that would meet in atomics from several blocks (split-K GEMMs, column and
  // per-channel sums, norms, loss sums) run with one block per output element instead, so their results do
  // not depend on the order in which blocks finish.
  bool deterministic = false;
  // 16-bit convolution and matmul on the tensor-core kernel (wmma); false: the portable SIMT tile kernel
  // (gemm_wmma.cuh). CNNTRAIN_CUDA_GEMM=simt in the environment turns it off for every stream.
  bool tensor_cores = true;
};
void register_kernel_settings(cudaStream_t stream, const KernelSettings& s);
void forget_kernel_settings(cudaStream_t stream);
KernelSettings kernel_settings(cudaStream_t stream);
// False when CNNTRAIN_CUDA_GEMM=simt (read once).
bool tensor_cores_allowed_by_env();

// Blocks for a reduction whose per-block partial results meet in atomics: `want`, or 1 when deterministic.
inline int reduction_blocks(int want, cudaStream_t stream) {
  return kernel_settings(stream).deterministic || want < 1 ? 1 : want;
}

// Blocks for a grid-stride loop over n items: enough to fill the device a few times over, never more than
// the items need (and at least one, so empty launches stay valid).
inline int grid_stride_blocks(size_t n, int block) {
  const size_t need = (n + block - 1) / block;
  const size_t cap = static_cast<size_t>(multiprocessor_count()) * 8;
  return static_cast<int>(need == 0 ? 1 : (need < cap ? need : cap));
}

}  // namespace CNN_CUDA_NS
}  // namespace cnn

#define CUDA_CHECK(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t cnn_cuda_err_ = (expr);                                                \
    if (__builtin_expect(cnn_cuda_err_ != cudaSuccess, 0))                                   \
      ::cnn::CNN_CUDA_NS::cuda_failed(#expr, cnn_cuda_err_, __FILE__, __LINE__);             \
  } while (0)
