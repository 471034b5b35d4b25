// The ops where a graph network's branches meet (Backend: add_forward, mul_forward/backward,
// concat_forward/backward), on NHWC tensors. `accumulate`: dx += the gradient instead of dx = it.
//   add:    y = a + b, n elements (the backward is dy for each input: a copy, or axpy to accumulate)
//   mul:    x, y: [n, hw, c], s: [n, c]: y[i,j,k] = x[i,j,k] * s[i,k]; dx = dy * s,
//           ds[i,k] = sum over j of dy[i,j,k] * x[i,j,k], summed in increasing j. Squeeze-excitation scales a
//           map [n, h, w, c] by [n, 1, 1, c] (hw = h*w); hw = 1 is the same-shape product.
//   concat: x[i]: [rows, channels[i]] side by side in y: [rows, sum of channels]; input i occupies channels
//           [offset_i, offset_i + channels[i]) of every row. The backward splits dy the same way.
#pragma once
#include <cstddef>

namespace cnn {

void add_forward_cpu(size_t n, const float* a, const float* b, float* y);
void mul_forward_cpu(int n, int hw, int c, const float* x, const float* s, float* y);
// dx, ds nullable; x is read only for ds, s only for dx.
void mul_backward_cpu(int n, int hw, int c, const float* x, const float* s, const float* dy, float* dx, float* ds,
                      bool accumulate);
// One input's share: y[r, offset + j] = x[r, j] for j < width, y's rows `stride` wide (the concatenation's
// forward, input by input), and its inverse (the split) with optional accumulation.
void concat_copy_in_cpu(int rows, int width, int stride, int offset, const float* x, float* y);
void concat_copy_out_cpu(int rows, int width, int stride, int offset, const float* dy, float* dx, bool accumulate);

}  // namespace cnn
