// Convolutions op by op (`train_bench`, unless --no-convs): oneDNN's kernels as the fast CPU backend runs them
// (kernels/cpu/dnnl_ops.h) on the convolution shapes of ResNet-20 and ResNet-50 and MobileNetV2's depthwise 3x3
// convolutions, GFLOP/s and % of the measured peak.
#pragma once
#include <vector>

#include "tests/bench/peak.h"

namespace cnn::bench {

void conv_table(const std::vector<int>& threads, const Peak& peak, int reps);

}  // namespace cnn::bench
