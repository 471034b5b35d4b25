// How a run reports and ends: the interval and evaluation logs, and the end of a run that completed, stopped
// at --train.stop_at_step, was preempted by a signal, or met a non-finite gradient.
#include <algorithm>
#include <cmath>

#include "kernels/loss.h"

#include "src/comm/comm.h"
#include "src/train/eval_report.h"
#include "src/train/run_dir.h"
#include "src/train/signals.h"
#include "src/train/trainer_run.h"

namespace cnn {

int Trainer::stop_on_nonfinite(const NonFiniteRecord& r) {
  const std::string what = describe_nonfinite(r, net_, obs_->hosts());
  const std::vector<std::string> ckpts = list_checkpoints(ckpt_dir_);
  const std::string resume = ckpts.empty()
      ? std::string("no checkpoint was committed, so a new run starts from scratch")
      : "the last committed checkpoint is " + ckpts.front() + ": continue from it with --resume auto";
  log_.warn("%s. Training stopped at that step (exit %d; its update was not applied); %s (e.g. with a lower "
            "--train.lr), or use --train.on_nonfinite skip", what.c_str(), kExitNonFinite, resume.c_str());
  obs_->finish();
  Json j;
  j.add("event", "end").add("status", "failed").add("reason", "nonfinite").add("steps", r.step)
      .add("message", what).add("resume_from", ckpts.empty() ? std::string() : ckpts.front())
      .add("final_test_acc", have_eval_ ? last_eval_.acc : NAN).add("wall_s", since(t_start_));
  log_.event(j);
  return kExitNonFinite;
}

// After settle_nonfinite(true), which waited for the device: the interval's work is done.
void Trainer::log_interval(const BatchPos& b, int64_t step) {
  const double wall = since(iv_.start);
  iv_.compute_s = std::max(0.0, wall - iv_.data_s - iv_.stats.comm_s);
  double sums[2] = {iv_.loss_sum, static_cast<double>(iv_.correct)};
  if (comm_) comm_->allreduce_sum_host(sums, 2, "train loss and accuracy totals");
  const double samples = static_cast<double>(iv_.steps) * cfg_.train.batch;
  const double counted = static_cast<double>(iv_.counted) * cfg_.train.batch;
  const double loss = sums[0] / counted, tacc = sums[1] / counted, lr = sched_.at(step);
  const LossScalerState& ls = scaler_->state();
  log_.info("epoch %lld step %lld/%lld (global %lld) loss %.4f train-acc %.2f%% lr %.5f %.0f samples/s "
            "(data %.0f%% comm %.0f%%)%s%s", (long long)b.epoch + 1, (long long)b.step + 1, (long long)spe_,
            (long long)step + 1, loss, 100 * tacc, lr, samples / wall, 100 * iv_.data_s / wall,
            100 * iv_.stats.comm_s / wall,
            scaler_->enabled() ? strprintf(" loss scale %g (%lld skipped, %lld so far)", ls.scale,
                                           (long long)iv_.skipped, (long long)ls.skipped_steps).c_str()
                               : "",
            obs_->eta_text(step + 1).c_str());
  Json j;
  j.add("event", "train").add("epoch", b.epoch + 1).add("step", step + 1).add("loss", loss)
      .add("train_acc", tacc).add("lr", lr).add("samples_per_s", samples / wall).add("data_s", iv_.data_s)
      .add("compute_s", iv_.compute_s).add("comm_s", iv_.stats.comm_s).add("steps", iv_.steps)
      .add("skipped", iv_.skipped).add("loss_scale", static_cast<double>(ls.scale))
      .add("loss_scale_growth", ls.growth_tracker).add("skipped_steps", ls.skipped_steps);
  obs_->add_train_fields(j, step + 1, iv_.grad_norm);
  log_.event(j);
  obs_->log_ranks(step + 1);
  iv_ = Interval();
}

// Top-5 is counted on the host: evaluation already waits for each batch's loss totals, and the logits it
// downloads for it (classes values per sample) are a small fraction of the images it uploads.
EvalResult Trainer::evaluate() {
  Dataset& ds = *s_.test;
  const DatasetInfo& info = ds.info();
  auto [begin, end] = shard_range(info.count, world_rank(), world_size());
  const int classes = net_.num_classes();
  const bool top5 = classes > 5;
  std::vector<int64_t> ids;
  std::vector<uint8_t> raw, logits16;
  std::vector<int32_t> lab;
  std::vector<float> logits32;
  double loss = 0;
  int64_t correct = 0, hits5 = 0;
  for (int64_t i = begin; i < end; i += cfg_.eval.batch) {
    int n = static_cast<int>(std::min<int64_t>(cfg_.eval.batch, end - i));
    ids.resize(n);
    for (int j = 0; j < n; ++j) ids[j] = i + j;
    raw.resize(n * info.sample_bytes());
    lab.resize(n);
    ds.read(ids.data(), n, raw.data(), lab.data());
    input_->upload_eval(raw.data(), lab.data(), n, info);
    const void* logits = net_.forward(buf_.x, n, false);
    be_.softmax_xent(net_.dtype(), n, classes, logits, buf_.labels, 0.f, 1.f, nullptr, &loss, &correct);
    if (top5 || !confusion_.empty()) {
      const size_t count = static_cast<size_t>(n) * classes;
      logits16.resize(count * dtype_size(net_.dtype()));
      logits32.resize(count);
      be_.download(logits16.data(), logits, logits16.size());
      convert_host(1, count, net_.dtype(), logits16.data(), DType::kF32, logits32.data());
      if (top5) hits5 += topk_hits_cpu(n, classes, 5, logits32.data(), lab.data());
      if (!confusion_.empty()) add_confusion(n, classes, logits32.data(), lab.data(), confusion_);
    }
  }
  double sums[4] = {loss, static_cast<double>(correct), static_cast<double>(end - begin), static_cast<double>(hits5)};
  if (comm_) comm_->allreduce_sum_host(sums, 4, "evaluation totals");
  if (comm_ && !confusion_.empty()) sum_confusion(*comm_, confusion_);
  return {sums[0] / sums[2], sums[1] / sums[2], top5 ? sums[3] / sums[2] : NAN, static_cast<int64_t>(sums[2])};
}

EvalResult Trainer::evaluate_ema() {
  ema_->swap_with(net_.params(), net_.buffers());
  net_.sync_weight_copy();
  const EvalResult r = evaluate();
  ema_->swap_with(net_.params(), net_.buffers());
  net_.sync_weight_copy();
  return r;
}

void Trainer::evaluate_and_log(const BatchPos& b, int64_t step) {
  auto te = Clock::now();
  average_buffers(be_, net_, comm_.get());
  if (ema_)
    average_across_ranks(be_, ema_->buffers(), ema_->num_buffers(), comm_.get(), "averaged batch-norm statistics");
  last_eval_ = evaluate();
  have_eval_ = true;
  const EvalResult e = ema_ ? evaluate_ema() : EvalResult();
  // The SWA average once its batch-norm statistics are recomputed: after the run's last step.
  const bool swa = swa_ && swa_->bn_current();
  const EvalResult w = swa ? evaluate_swa() : EvalResult();
  log_.info("epoch %lld: test loss %.4f test accuracy %.2f%%%s%s%s (%lld images, %.1f s)", (long long)b.epoch + 1,
            last_eval_.loss, 100 * last_eval_.acc,
            std::isnan(last_eval_.top5) ? "" : strprintf(" top-5 %.2f%%", 100 * last_eval_.top5).c_str(),
            ema_ ? strprintf("; EMA weights: test loss %.4f test accuracy %.2f%%", e.loss, 100 * e.acc).c_str() : "",
            swa ? strprintf("; SWA weights: test loss %.4f test accuracy %.2f%%", w.loss, 100 * w.acc).c_str() : "",
            (long long)last_eval_.count, since(te));
  Json j;
  j.add("event", "eval").add("epoch", b.epoch + 1).add("step", step + 1).add("test_loss", last_eval_.loss)
      .add("test_acc", last_eval_.acc).add("count", last_eval_.count);
  if (!std::isnan(last_eval_.top5)) j.add("test_top5", last_eval_.top5);
  if (ema_) {
    j.add("ema_test_loss", e.loss).add("ema_test_acc", e.acc);
    if (!std::isnan(e.top5)) j.add("ema_test_top5", e.top5);
  }
  if (swa) {
    j.add("swa_test_loss", w.loss).add("swa_test_acc", w.acc);
    if (!std::isnan(w.top5)) j.add("swa_test_top5", w.top5);
  }
  log_.event(j);
  iv_.start = Clock::now();  // evaluation time is not training throughput
}

int Trainer::agreed_stop_signal() const { return allreduce_max(stop_signal()); }

int Trainer::stop_on_signal(int sig, const Cursor& next) {
  const int rc = exit_code_for_signal(sig);
  log_.warn("received %s: writing a checkpoint at step %lld and stopping (exit %d)", signal_name(sig),
            (long long)next.step, rc);
  ckpt_->save(next);
  log_.info("stopped at step %lld of %lld; continue with: %s", (long long)next.step, (long long)total_,
            resume_command(cfg_, run_dir_).c_str());
  Json j;
  j.add("event", "end").add("status", "preempted").add("reason", signal_name(sig)).add("steps", next.step)
      .add("final_test_acc", have_eval_ ? last_eval_.acc : NAN).add("wall_s", since(t_start_));
  log_.event(j);
  return rc;
}

int Trainer::stop_at_step(const Cursor& next) {
  obs_->finish();
  if (ckpt_->last_step() != next.step) ckpt_->save(next);
  log_.info("stopped after step %lld of %lld (--train.stop_at_step); continue with: %s", (long long)next.step,
            (long long)total_, resume_command(cfg_, run_dir_).c_str());
  Json j;
  j.add("event", "end").add("status", "stopped").add("reason", "stop_at_step").add("steps", next.step)
      .add("final_test_acc", have_eval_ ? last_eval_.acc : NAN).add("wall_s", since(t_start_));
  log_.event(j);
  return kExitOk;
}

bool Trainer::checkpoint_due(const Cursor& next) {
  bool due = cfg_.checkpoint.every_steps > 0 && next.step % cfg_.checkpoint.every_steps == 0;
  if (cfg_.checkpoint.every_seconds > 0) {
    // Clocks differ between nodes: rank 0 decides and everyone follows.
    int d = since(t_ckpt_) >= cfg_.checkpoint.every_seconds ? 1 : 0;
    broadcast(&d, sizeof d, 0);
    due = due || d;
  }
  // The end-of-run checkpoint (finish) covers the last step, stop_at_step its own.
  return due && (next.step < total_ || !cfg_.checkpoint.at_end) && next.step != stop_at_;
}

void Trainer::save_checkpoint(const Cursor& next) {
  const auto t = Clock::now();
  ckpt_->save(next);
  obs_->timing().add(Phase::kCheckpoint, since(t));
}

int Trainer::finish() {
  obs_->finish();
  if (cfg_.checkpoint.at_end && total_ > 0 && ckpt_->last_step() != total_)
    ckpt_->save({total_, total_ / spe_, total_ % spe_});
  const double wall = since(t_start_);
  if (have_eval_)
    log_.info("completed %lld steps in %.1f s; final test accuracy %.2f%%", (long long)total_, wall,
              100 * last_eval_.acc);
  else
    log_.info("completed %lld steps in %.1f s (no test set given)", (long long)total_, wall);
  Json j;
  j.add("event", "end").add("status", "completed").add("steps", total_)
      .add("final_test_acc", have_eval_ ? last_eval_.acc : NAN).add("wall_s", wall);
  log_.event(j);
  return kExitOk;
}

}  // namespace cnn
