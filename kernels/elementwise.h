// Element-wise ops and reductions used by residual blocks, gradient accumulation and clipping.
//   axpy:      y += alpha * x
//   scale:     x *= alpha
//   sum_squares: sum of x^2 in double (gradient norms)
//   shortcut_pad (He et al. option A): x: [N,H,W,C] -> y: [N,P,Q,K], P = ceil(H/stride), K >= C;
//     y[n,p,q,k] = x[n,p*stride,q*stride,k] for k < C, 0 for the extra channels. Backward adds dy back:
//     dx[n,p*stride,q*stride,k] += dy[n,p,q,k] for k < C, the other elements of dx left as they are (the
//     residual block's dx, which its main path wrote).
#pragma once
#include <cstddef>

namespace cnn {

void axpy_cpu(size_t n, float alpha, const float* x, float* y);
void scale_cpu(size_t n, float alpha, float* x);
double sum_squares_cpu(size_t n, const float* x);
void shortcut_pad_forward_cpu(int n, int h, int w, int c, int stride, int k, const float* x, float* y);
void shortcut_pad_backward_add_cpu(int n, int h, int w, int c, int stride, int k, const float* dy, float* dx);

}  // namespace cnn
