// Pooling over NHWC. x: [N,H,W,C], y: [N,P,Q,C]; padded taps never win a max.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace cnn {

// argmax: [N,P,Q,C] flat offsets into x of each window's maximum (first one on ties). relu: y = max(y, 0)
// (pooling a ReLU's output, see Backend::maxpool_forward).
void maxpool_forward_cpu(const PoolDesc& d, const float* x, bool relu, float* y, int32_t* argmax);
// dx = 0, then dx[argmax] += dy, where relu_y > 0 when relu_y is not null.
void maxpool_backward_cpu(const PoolDesc& d, const float* dy, const float* relu_y, const int32_t* argmax, float* dx);
// Average over the window's taps inside the input (padding is excluded from the count, unless
// d.count_include_pad: then the taps inside the padded input count, window.h's avg_divisor). Global average
// pooling is the window r = H, s = W.
void avgpool_forward_cpu(const PoolDesc& d, const float* x, float* y);
// dx overwritten: each input tap receives dy / (taps in its window).
void avgpool_backward_cpu(const PoolDesc& d, const float* dy, float* dx);

}  // namespace cnn
