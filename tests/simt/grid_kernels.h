// Host entry points of kernels whose blocks share data (tests/simt/grid_kernels.cu), for the emulator's
// interleaved blocks (simt::set_resident_blocks); ordinary CUDA, also built by nvcc (make simt-nvcc-check).
// All pointers are device pointers.
#pragma once
#include "kernels/simt/cuda_compat.h"

// Planted bug: every block of `grid` adds one to *counter without an atomic, reading it before the block's
// __syncthreads and writing it after: right when blocks run one after another, lost updates when they
// interleave.
cudaError_t run_racy_block_count(int* counter, int grid);
// *out = sum of x[0..n) in one launch of `grid` blocks of 64: each block writes its partial sum to
// partial[blockIdx.x] and takes a ticket from *done (which must start at 0; the last block resets it); the
// block with the last ticket adds all partials. The correct kernel publishes its partial before the ticket
// (with __threadfence); the planted bug (claim_first) takes the ticket first, so the last block may add a
// partial that is not written yet.
cudaError_t run_last_block_sum(const float* x, int n, float* partial, unsigned* done, float* out, int grid,
                               bool claim_first);
