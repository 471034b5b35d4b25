// What `cnntrain --eval-only` reports beyond the training-time evaluation (docs/models.md, "Evaluation"): the
// confusion matrix, the per-class accuracy read from it, and a picture of it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/collectives.h"

namespace cnn {

// confusion[label * classes + predicted] += 1 for n samples, the prediction being the first largest logit.
void add_confusion(int n, int classes, const float* logits, const int32_t* labels, std::vector<int64_t>& confusion);
// Sums the ranks' matrices (collective).
void sum_confusion(Collectives& comm, std::vector<int64_t>& confusion);
// Per true class, the fraction predicted right; NAN for a class without samples.
std::vector<double> per_class_accuracy(const std::vector<int64_t>& confusion, int classes);
// A PNG heat map: one square per cell, white (0) to dark blue (the whole row), rows true classes top to bottom,
// columns predicted classes left to right; so the diagonal is what was right.
std::string confusion_png(const std::vector<int64_t>& confusion, int classes);

}  // namespace cnn
