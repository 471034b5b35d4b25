// One data-parallel training step on this rank's slice of the global batch: forward, loss (mean over the
// global batch), backward with bucketed gradient allreduce, optional clipping, optimizer update. With
// accum_steps K the slice runs as K micro-batches whose gradients add up before one allreduce and one update
// (the sum of K micro-batch gradients of the mean loss is the full batch's; batch norm, if any, normalises
// each micro-batch with its own statistics). Nothing here synchronises the host with the device: the loss sums
// stay on the device until take_loss_totals, and the gradient sync orders the optimizer after its buckets.
#pragma once
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/collectives.h"
#include "kernels/mix_images.h"
#include "src/model/net.h"
#include "src/obs/step_timing.h"
#include "src/train/nonfinite.h"
#include "src/train/loss_scaler.h"
#include "src/train/optimizer.h"
#include "src/train/weight_ema.h"

namespace cnn {

struct StepBuffers {
  float* x = nullptr;         // device, [max local batch, H, W, C]
  int32_t* labels = nullptr;  // device, [max local batch]
  int64_t* ids = nullptr;     // device, [max local batch] global sample ids (dropout masks)
  MixDraw* mix = nullptr;     // device, [max local batch] mixup/cutmix draws (kernels/mix_images.h)
  void* dlogits = nullptr;    // device, [net.max_batch(), classes] of the net's activation type (one micro-batch)
  LossTotals* totals = nullptr;  // device: loss sum and correct count of the steps since take_loss_totals
  // device, [net.num_buffers()]: the batch-norm running statistics before a step that may be skipped, put back
  // when it is (a non-finite forward would leave NaN in them for good); null when the net has none.
  float* saved_buffers = nullptr;
};

struct StepConfig {
  int64_t global_batch = 1;
  float label_smoothing = 0.f;
  int accum_steps = 1;           // the local batch n must be divisible by it
  double clip_norm = 0.0;        // clip the global gradient L2 norm to this; 0: off
  uint64_t seed = 0;             // with step and ids: the batch context of stochastic layers
  int64_t step = 0;
  const int64_t* ids = nullptr;  // device [n] global sample ids (usually StepBuffers::ids), or null
  // device [n] mixup/cutmix draws (StepBuffers::mix) for the soft-target loss (Backend::softmax_xent_mix_totals),
  // or null: the one-hot loss of the labels.
  const MixDraw* mix = nullptr;
  StepTiming* timing = nullptr;          // marks forward/backward/comm/optimizer when not null
  NonFiniteGuard* nonfinite = nullptr;   // checks the gradient before and after the allreduce when not null
  LossTotals* totals = nullptr;          // device: where the step adds its loss sums; null: StepBuffers::totals
  // fp16 dynamic loss scaling (docs/mixed_precision.md), or null: the loss gradient carries scaler->scale(),
  // divided out of the averaged gradient before clipping and the update, which is skipped (optimizer state
  // and weights unchanged) when that gradient holds an inf or a NaN.
  LossScaler* scaler = nullptr;
  // With the guard: learn its verdict before the update (one device-to-host read) and skip opt.step for a
  // non-finite gradient, so that an optimizer counting its updates (AdamW's bias correction) does not count a
  // step whose update the gate suppressed (--train.on_nonfinite skip).
  bool count_only_applied = false;
  // Folds the weights of every applied update into this average (--train.ema), or null. Only an update the
  // host knows was applied counts: with the guard, count_only_applied must be set (a gated step is no update).
  WeightEma* ema = nullptr;
  // Where the GradSync's array begins in the flat gradient: the part before it is frozen (src/train/freeze.h).
  size_t sync_offset = 0;
  // Frozen parameters above sync_offset, [begin, end) in the flat gradient (FreezePlan::frozen_inside): left
  // out of the GradSync, and zeroed after backward, so that no rank's own gradient there reaches the clipping
  // norm (or the nonfinite check) and np 1 and np N see the same.
  std::vector<std::pair<size_t, size_t>> frozen_inside;
};

struct StepStats {
  double comm_s = 0;     // host seconds waiting for the gradient sync (device runs: ~0, the device waits)
  double grad_norm = 0;  // of the last step, when clipping is on
  int64_t skipped = 0;   // steps the loss scaler skipped
};

// Device buffers for up to max(local_batch, net.max_batch()) samples; released by free_step_buffers.
StepBuffers alloc_step_buffers(Backend& be, const Net& net, int local_batch = 0);
void free_step_buffers(Backend& be, StepBuffers& b);
// This rank's loss sum and correct count since the last call, then zeroes them: synchronises the host with
// the device, so call it at log intervals only.
void take_loss_totals(Backend& be, const StepBuffers& b, double* loss_sum, int64_t* correct);

// x/labels (and ids) of the n local samples must already be in `buf`. `sync` may be null (single process);
// its collectives also serve synchronised batch norm.
void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                const StepConfig& sc, double lr, StepStats& stats);
// The short form: one micro-batch, no clipping, no sample ids.
void train_step(Backend& be, Net& net, Optimizer& opt, GradSync* sync, const StepBuffers& buf, int n,
                int64_t global_batch, float label_smoothing, double lr, StepStats& stats);

}  // namespace cnn
