// Softmax cross-entropy with label smoothing, forward and backward fused.
// logits: [n, classes], labels: int32 [n], dlogits: [n, classes] (nullable) = scale * d(sum loss)/d(logits).
#pragma once
#include <cstdint>

namespace cnn {

void softmax_xent_cpu(int n, int classes, const float* logits, const int32_t* labels, float label_smoothing,
                      float scale, float* dlogits, double* loss_sum, int64_t* correct);

struct MixDraw;  // kernels/mix_images.h

// The soft-target loss of mixup/cutmix (timm's mixup_target + SoftTargetCrossEntropy): row i's target is
// lam_i * q(labels[i]) + (1 - lam_i) * q(mix[i].partner_label), q the label-smoothed one-hot above, lam_i =
// mix[i].lam; so the loss is lam_i * CE(labels[i]) + (1 - lam_i) * CE(partner) and dlogits = scale *
// (softmax - target). *correct counts the rows whose arg-max is labels[i] (the sample's own label).
void softmax_xent_mix_cpu(int n, int classes, const float* logits, const int32_t* labels, const MixDraw* mix,
                          float label_smoothing, float scale, float* dlogits, double* loss_sum, int64_t* correct);

// Top-k hits over host logits [n, classes]: the number of rows whose label is among the k largest logits.
// Ties count in the label's favour: a row is a hit when fewer than k classes have a logit strictly larger
// than the label's (so k = 1 here counts a row whose maximum is shared by the label, where softmax_xent's
// arg-max takes the lowest index); a NaN label logit is a miss.
int64_t topk_hits_cpu(int n, int classes, int k, const float* logits, const int32_t* labels);

}  // namespace cnn
