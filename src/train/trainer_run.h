// Internal to src/train: the Trainer behind run_training (trainer.h). Its members are defined in
// trainer.cpp (the step loop), trainer_start.cpp (run directory, start log, the plan of the run),
// trainer_stop.cpp (interval logs, evaluation, and the ways a run ends: completed, stopped, preempted,
// non-finite) and trainer_swa.cpp (stochastic weight averaging). Setup before the first collective is
// src/train/setup.cpp; what checkpoints hold and --resume is src/train/run_checkpoints.cpp; one step's math is
// src/train/step.cpp.
#pragma once
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <memory>

#include "io/loader.h"
#include "io/sampler.h"
#include "src/base/error.h"
#include "kernels/collectives.h"
#include "src/obs/run_observer.h"
#include "src/obs/runlog.h"
#include "src/train/freeze.h"
#include "src/train/input_path.h"
#include "src/train/loss_ring.h"
#include "src/train/nonfinite.h"
#include "src/train/recipe.h"
#include "src/train/run_checkpoints.h"
#include "src/train/schedule.h"
#include "src/train/setup.h"
#include "src/train/step.h"
#include "src/train/swa.h"
#include "src/train/weight_ema.h"

namespace cnn {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// top5: the fraction of samples whose label is among the 5 largest logits (kernels/loss.h, topk_hits_cpu);
// NAN when the net has at most 5 classes (every label would be).
struct EvalResult {
  double loss = 0, acc = 0, top5 = NAN;
  int64_t count = 0;
};

// Where a batch sits in the global batch sequence (kept after the loader has recycled the batch).
struct BatchPos {
  int64_t epoch = 0, step = 0;
};

// What the train events report: sums over the steps since the last one. Loss and accuracy count only the
// steps the non-finite check confirmed (`counted`); skipped steps are counted apart.
struct Interval {
  StepStats stats;
  double loss_sum = 0, data_s = 0, compute_s = 0, grad_norm = -1;
  int64_t correct = 0;
  int64_t steps = 0, counted = 0, skipped = 0;
  Clock::time_point start = Clock::now();
};

class Trainer {
 public:
  Trainer(const Config& cfg, Setup s)
      : cfg_(cfg), s_(std::move(s)), be_(*s_.be), net_(*s_.net),
        scaler_(std::make_unique<LossScaler>(make_loss_scaler_config(cfg))) {}
  ~Trainer() {
    be_.set_update_gate(nullptr);
    free_step_buffers(be_, buf_);
  }
  int run();

 private:
  void prepare_run_dir();
  void broadcast_initial_params();
  void log_start();
  // Sampler, schedule, optimizer and checkpoints; returns where training starts (after --resume).
  Cursor plan();
  // Waits for the loader's next batch and uploads it.
  const Batch& next_batch(Loader& loader);
  // One step on the uploaded batch; `after_queue` runs once the step is queued (the next batch's upload goes
  // there, so that its copy overlaps this step on a device). The host does not wait for the device.
  void train_one_step(int64_t step, const std::function<void()>& after_queue);
  void log_interval(const BatchPos& b, int64_t step);
  void evaluate_and_log(const BatchPos& b, int64_t step);
  EvalResult evaluate();
  // evaluate() with the moving average of the weights in place of the weights (--train.ema).
  EvalResult evaluate_ema();
  // --train.swa_start_epoch: the average (before the checkpoints, which hold it), checked against the run's length.
  void plan_swa();
  // --train.freeze/lr_mult in force for `epoch` (freezing ends at --train.unfreeze_at_epoch): the net's backward
  // stop, the optimizer's factors, and the gradient sync over the trained part (src/train/trainer_freeze.cpp).
  void apply_freeze(int64_t epoch);
  void make_grad_sync();
  // At an epoch's end (pos): folds the weights into the SWA average from the start epoch on, and after the
  // run's last step recomputes the batch-norm statistics for it.
  void swa_epoch_end(const BatchPos& pos, int64_t step);
  // Collective: the SWA average's batch-norm statistics, over one epoch of the training set.
  void recompute_swa_bn();
  // evaluate() with the SWA average and its batch-norm statistics in place of the net's.
  EvalResult evaluate_swa();
  // Every rank learns of a signal any rank received (collective), so all stop after the same step.
  int agreed_stop_signal() const;
  int stop_on_signal(int sig, const Cursor& next);
  // --train.stop_at_step: the checkpoint at `next`, an end event "stopped", exit 0.
  int stop_at_step(const Cursor& next);
  bool checkpoint_due(const Cursor& next);
  void save_checkpoint(const Cursor& next);
  // Acts on the non-finite verdicts that reached the host (all outstanding ones with `all`): counts the
  // confirmed steps, skips or stops. Returns kExitNonFinite when the run must stop, else 0.
  int settle_nonfinite(bool all);
  int stop_on_nonfinite(const NonFiniteRecord& r);
  int finish();
  // --eval-only: the resumed weights on the test set, with per-class accuracy and the confusion matrix
  // (metrics.jsonl and RUN_DIR/eval/confusion-<step>.png); trainer_eval.cpp.
  int evaluate_only(const Cursor& start);

  const Config& cfg_;
  Setup s_;
  Backend& be_;
  Net& net_;
  RunLog log_;
  std::string run_dir_, ckpt_dir_;
  StepBuffers buf_;
  std::unique_ptr<InputPath> input_;
  std::unique_ptr<Sampler> sampler_;
  LrSchedule sched_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<WeightEma> ema_;  // --train.ema, else null
  std::unique_ptr<SwaAverage> swa_;  // --train.swa_start_epoch, else null
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<RunCheckpoints> ckpt_;
  std::unique_ptr<Collectives> comm_;  // before sync_, which uses it
  std::unique_ptr<GradSync> sync_;
  FreezePlan freeze_;
  bool frozen_ = false;  // --train.freeze in force
  std::unique_ptr<RunObserver> obs_;
  std::unique_ptr<NonFiniteGuard> guard_;
  std::unique_ptr<LossRing> losses_;
  std::deque<std::pair<int64_t, StepStats>> unconfirmed_;  // per-step stats awaiting the guard's verdict
  int64_t skipped_total_ = 0;
  double last_loss_ = NAN;
  StepConfig sc_;
  int64_t spe_ = 1, total_ = 0;
  int64_t stop_at_ = 0;  // --train.stop_at_step within the run, else 0
  Clock::time_point t_start_ = Clock::now(), t_ckpt_ = Clock::now();
  Interval iv_;
  std::vector<int64_t> confusion_;  // --eval-only: [true class][predicted class], summed by evaluate()
  EvalResult last_eval_;
  bool have_eval_ = false;
};

}  // namespace cnn
