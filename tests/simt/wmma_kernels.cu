// Tensor-core kernels (nvcuda::wmma) for the emulator's tests; ordinary CUDA, also built by nvcc for sm_80/90.
#include "tests/simt/wmma_kernels.h"

namespace wmma = nvcuda::wmma;

template <class T>
__global__ void wmma_mma_kernel(const T* a, const T* b, const float* c, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 24);
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

__global__ void wmma_two_tiles_kernel(const __half* a, const __half* b, float scale, float* d) {
  const int tile = threadIdx.x / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b + 16 * tile, 32);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= scale;
  wmma::store_matrix_sync(d + 16 * tile, acc, 32, wmma::mem_row_major);
}

__global__ void wmma_indexed_bias_kernel(const __half* a, const __half* b, const float* bias, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] += bias[(32 * i + lane) % 16];
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

extern const int kWmmaMisalignedLine = __LINE__ + 4;
__global__ void wmma_misaligned_kernel(const __half* a, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::load_matrix_sync(fa, a + 1, 16);
  wmma::load_matrix_sync(fb, a, 16);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

extern const int kWmmaBadLdmLine = __LINE__ + 3;
__global__ void wmma_bad_ldm_kernel(const __half* a, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 12);
  d[threadIdx.x] = static_cast<float>(fa.x[0]);
}

extern const int kWmmaDivergentLine = __LINE__ + 10;
__global__ void wmma_divergent_kernel(const __half* a, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, a, 16);
  wmma::fill_fragment(acc, 0.0f);
  if (threadIdx.x < 16) {
    // Half of the warp: undefined behaviour on a GPU, a reported error here.
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}


cudaError_t run_wmma_mma(const __half* a, const __half* b, const float* c, float* d) {
  auto* k = &wmma_mma_kernel<__half>;
  return CNN_LAUNCH(k, 1, 32, 0, 0, a, b, c, d);
}
cudaError_t run_wmma_mma(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d) {
  auto* k = &wmma_mma_kernel<__nv_bfloat16>;
  return CNN_LAUNCH(k, 1, 32, 0, 0, a, b, c, d);
}
cudaError_t run_wmma_two_tiles(const __half* a, const __half* b, float scale, float* d) {
  return CNN_LAUNCH(wmma_two_tiles_kernel, 1, 64, 0, 0, a, b, scale, d);
}
cudaError_t run_wmma_indexed_bias(const __half* a, const __half* b, const float* bias, float* d) {
  return CNN_LAUNCH(wmma_indexed_bias_kernel, 1, 32, 0, 0, a, b, bias, d);
}
cudaError_t run_wmma_misaligned(const __half* a, float* d) {
  return CNN_LAUNCH(wmma_misaligned_kernel, 1, 32, 0, 0, a, d);
}
cudaError_t run_wmma_bad_ldm(const __half* a, float* d) { return CNN_LAUNCH(wmma_bad_ldm_kernel, 1, 32, 0, 0, a, d); }
cudaError_t run_wmma_divergent(const __half* a, float* d) {
  return CNN_LAUNCH(wmma_divergent_kernel, 1, 32, 0, 0, a, d);
}
