// Softmax cross-entropy with label smoothing, forward and backward fused.
// logits: [n, classes], labels: int32 [n], dlogits: [n, classes] (nullable) = scale * d(sum loss)/d(logits).
#pragma once
#include <cstdint>

namespace cnn {

void softmax_xent_cpu(int n, int classes, const float* logits, const int32_t* labels, float label_smoothing,
                      float scale, float* dlogits, double* loss_sum, int64_t* correct);

}  // namespace cnn
