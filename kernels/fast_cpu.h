// Multithreaded (OpenMP) element-wise, pooling and optimizer kernels of the fast CPU backend. Same semantics
// as the reference kernels in activation.h, pooling.h and optimizer.h; work is split statically over
// `threads`, each output element is computed by one thread in a fixed order, so results do not depend on
// scheduling (and are the same for any thread count).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

void fill_fast(int threads, float* x, size_t n, float v);
void relu_forward_fast(int threads, size_t n, const float* x, float* y);
void relu_backward_fast(int threads, size_t n, const float* y, const float* dy, float* dx);
void maxpool_forward_fast(int threads, const PoolDesc& d, const float* x, float* y, int32_t* argmax);
void maxpool_backward_fast(int threads, const PoolDesc& d, const float* dy, const int32_t* argmax, float* dx);
void sgd_update_fast(int threads, size_t n, float* w, const float* g, float* v, float lr, float momentum, float wd,
                     bool nesterov);

}  // namespace cnn
