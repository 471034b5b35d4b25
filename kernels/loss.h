// Softmax cross-entropy with label smoothing, forward and backward fused.
// logits: [n, classes], labels: int32 [n], dlogits: [n, classes] (nullable) = scale * d(sum loss)/d(logits).
#pragma once
#include <cstdint>

namespace cnn {

void softmax_xent_cpu(int n, int classes, const float* logits, const int32_t* labels, float label_smoothing,
                      float scale, float* dlogits, double* loss_sum, int64_t* correct);

// Top-k hits over host logits [n, classes]: the number of rows whose label is among the k largest logits.
// Ties count in the label's favour: a row is a hit when fewer than k classes have a logit strictly larger
// than the label's (so k = 1 here counts a row whose maximum is shared by the label, where softmax_xent's
// arg-max takes the lowest index); a NaN label logit is a miss.
int64_t topk_hits_cpu(int n, int classes, int k, const float* logits, const int32_t* labels);

}  // namespace cnn
