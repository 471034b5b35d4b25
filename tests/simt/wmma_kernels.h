// Host entry points of the tensor-core test kernels (tests/simt/wmma_kernels.cu), built with nvcc (make
// simt-nvcc-check) and against the emulator's nvcuda::wmma (make test-simt). All pointers are device pointers.
#pragma once
#include "kernels/simt/cuda_compat.h"

// One warp: d[16x16] = a * b + c with a row-major (lda 16), b column-major (ldb 24: padded), c and d
// row-major float (ld 16). Every 16-bit element type wmma offers on sm_80.
cudaError_t run_wmma_mma(const __half* a, const __half* b, const float* c, float* d);
cudaError_t run_wmma_mma(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d);
// Two warps each compute one 16x16 tile of a 16x32 result from a 16x16 a and a 16x32 b (both row-major),
// with fill_fragment for the zero accumulator and a scaling of the accumulator elements before the store.
cudaError_t run_wmma_two_tiles(const __half* a, const __half* b, float scale, float* d);

// Planted non-portable kernel: d[16x16] = a * b (both row-major, ld 16) + bias[column], the bias added through
// acc.x[i] at the column the emulator's fixed mapping gives element i (tile element 32 i + lane): right under
// that mapping only, wrong on a GPU and under scrambled mappings (simt::set_wmma_scramble).
cudaError_t run_wmma_indexed_bias(const __half* a, const __half* b, const float* bias, float* d);

// Planted bugs the emulator must report, naming the source line.
extern const int kWmmaMisalignedLine, kWmmaBadLdmLine, kWmmaDivergentLine;
cudaError_t run_wmma_misaligned(const __half* a, float* d);  // loads from a + 1: not 32-byte aligned
cudaError_t run_wmma_bad_ldm(const __half* a, float* d);     // ldm 12: not a multiple of 16 bytes
cudaError_t run_wmma_divergent(const __half* a, float* d);   // only lanes 0..15 call mma_sync
