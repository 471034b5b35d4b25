// One data-parallel training step on this rank's slice of the global batch: forward, loss (mean over the
// global batch), backward with bucketed gradient allreduce, optimizer update.
#pragma once
#include <cstdint>

#include "kernels/backend.h"
#include "src/grad_sync.h"
#include "src/net.h"
#include "src/optimizer.h"

namespace cnn {

struct StepBuffers {
  float* x = nullptr;        // device, [max_n, H, W, C]
  int32_t* labels = nullptr;  // device, [max_n]
  float* dlogits = nullptr;  // device, [max_n, classes]
};

struct StepStats {
  double loss_sum = 0;   // sum over this rank's samples
  int64_t correct = 0;
  double comm_s = 0;
};

// Device buffers for `net`'s largest batch; released by free_step_buffers.
StepBuffers alloc_step_buffers(Backend& be, const Net& net);
void free_step_buffers(Backend& be, StepBuffers& b);

// x/labels of the n local samples must already be in `buf`. `sync` may be null (single process, no averaging).
void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                int64_t global_batch, float label_smoothing, double lr, StepStats& stats);

}  // namespace cnn
