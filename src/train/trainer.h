// The training run: setup (datasets, model, run directory), the step loop, evaluation and logs.
#pragma once
#include "src/train/config.h"

namespace cnn {

// Runs training as configured on every rank (collective). Returns the process exit code; throws
// cnn::Error for failures after setup (the caller aborts the job with its code).
int run_training(const Config& cfg);

}  // namespace cnn
