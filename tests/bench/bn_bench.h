// Batch norm op by op (`train_bench --bn`): the fast CPU backend's fused batch norm + ReLU against oneDNN's
// batch normalization primitive with its fused ReLU, on ResNet-20 and ResNet-50 activation shapes; the
// measurement behind keeping the own kernels (docs/perf.md).
#pragma once
#include <vector>

namespace cnn::bench {

void bn_table(const std::vector<int>& threads, int reps);
// Activation forward and backward on random inputs: the backward must stay branch-free (vectorised).
void activation_table(int reps);

}  // namespace cnn::bench
