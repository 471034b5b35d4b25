// Multithreaded (OpenMP) kernels of the graph-network ops for the fast CPU backend: the semantics of
// kernels/activation.h and kernels/join.h. Static splits, each output computed by one thread in the
// reference's order, so results do not depend on the thread count and are those of the reference kernels (the
// mul's channel sums included: one thread adds each sum over hw in increasing order), except for the sigmoid
// and SiLU, whose exp is a vectorisable one within 3 ulp.
#pragma once
#include <cstddef>

#include "kernels/backend.h"

namespace cnn {

void activation_forward_fast(int threads, const Activation& a, size_t n, const float* x, float* y);
void activation_backward_fast(int threads, const Activation& a, size_t n, const float* x, const float* dy, float* dx,
                              bool accumulate);
void add_forward_fast(int threads, size_t n, const float* a, const float* b, float* y);
void mul_forward_fast(int threads, int n, int hw, int c, const float* x, const float* s, float* y);
void mul_backward_fast(int threads, int n, int hw, int c, const float* x, const float* s, const float* dy, float* dx,
                       float* ds, bool accumulate);
// On the storage type t itself (moving values needs no widening; a 16-bit accumulation widens, adds in fp32
// and rounds once), all inputs in one pass over the rows.
void concat_forward_fast(int threads, DType t, int rows, int k, const int* channels, const void* const* x, void* y);
void concat_backward_fast(int threads, DType t, int rows, int k, const int* channels, const void* dy,
                          void* const* dx, bool accumulate);

}  // namespace cnn
