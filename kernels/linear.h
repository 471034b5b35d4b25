// Fully connected layer. x: [M,K] (a flattened NHWC activation), w: [N,K], b: [N], y: [M,N] = x w^T + b.
#pragma once

namespace cnn {

void linear_forward_cpu(int m, int k, int n, const float* x, const float* w, const float* b, float* y);
void linear_backward_data_cpu(int m, int k, int n, const float* dy, const float* w, float* dx);
// dw += dy^T x; db += sum over rows of dy (db may be null).
void linear_backward_weight_cpu(int m, int k, int n, const float* x, const float* dy, float* dw, float* db);

}  // namespace cnn
