// The training recipe as the trainer applies it: the settings of the model, optimizer, schedule, step,
// augmentation and observability taken from the Config, and the averaging of the net's buffers across ranks. Kept out of
// trainer.cpp so the run loop stays readable and other subsystems (checkpoints) can reuse the pieces.
#pragma once
#include <cstdint>

#include "io/augment.h"
#include "kernels/backend.h"
#include "kernels/collectives.h"
#include "src/train/config.h"
#include "src/model/zoo.h"
#include "src/model/net.h"
#include "src/obs/obs_options.h"
#include "src/train/loss_scaler.h"
#include "src/train/optimizer.h"
#include "src/train/schedule.h"
#include "src/train/step.h"

namespace cnn {

ModelOptions make_model_options(const Config& cfg);
OptimizerConfig make_optimizer_config(const Config& cfg);
// Epoch-valued options (warmup, milestones, step_epochs, swa_start_epoch) become optimizer steps at `steps_per_epoch`.
LrSchedule make_lr_schedule(const Config& cfg, int64_t steps_per_epoch, int64_t total_steps);
// Everything but the per-step fields (step, ids).
StepConfig make_step_config(const Config& cfg);
AugmentConfig make_augment_config(const Config& cfg);
ObsOptions make_obs_options(const Config& cfg);
// --precision as a DType, and fp16's loss scaler (disabled for fp32 and bf16).
DType activation_dtype(const Config& cfg);
LossScalerConfig make_loss_scaler_config(const Config& cfg);

// Batch norm's running statistics come from each rank's own batches; replaces them on every rank by their
// mean over the ranks of `comm` (collective; null: this process alone, nothing to do), so that all ranks
// evaluate and checkpoint the same model. Exact for the running means (the average of exponential moving
// averages is the moving average of the averaged batch means), a close estimate for the variances. The sum
// runs in the backend's memory through `comm` (NCCL on GPUs), without a round trip through the host.
void average_buffers(Backend& be, Net& net, Collectives* comm);
// v[0, n) (device memory) = its mean over the ranks of comm (nothing without comm); `what` names it in errors.
void average_across_ranks(Backend& be, float* v, size_t n, Collectives* comm, const char* what);

}  // namespace cnn
