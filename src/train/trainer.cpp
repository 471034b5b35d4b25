// The run's step loop: the next batch, one step, the non-finite verdicts, and when to log, evaluate,
// checkpoint or stop (src/train/trainer_run.h).
#include "src/train/trainer.h"

#include <algorithm>

#include "src/comm/comm.h"
#include "src/comm/watchdog.h"
#include "src/train/trainer_run.h"

namespace cnn {

const Batch& Trainer::next_batch(Loader& loader) {
  double wait = 0;
  const Batch& b = loader.next(&wait);
  iv_.data_s += wait;
  obs_->timing().add(Phase::kData, wait);
  obs_->timing().mark(Phase::kH2D);
  input_->upload(b);
  obs_->timing().idle();
  return b;
}

// No host-device synchronisation here: on a GPU the host queues the step (and, through after_queue, the next
// batch's upload) and moves on; the step's loss reaches the host with the non-finite verdict, a step later.
void Trainer::train_one_step(int64_t step, const std::function<void()>& after_queue) {
  set_collective_step(step);
  sc_.step = step;
  sc_.totals = losses_->begin_step(step);
  StepStats st;
  train_step(be_, net_, *opt_, sync_.get(), buf_, s_.local_batch, sc_, sched_.at(step), st);
  losses_->end_step(step);  // queued before the guard's record: when the host has that, it has the loss
  guard_->end_step(step, true);  // the loss's own finiteness joins the record when it is settled
  after_queue();
  iv_.stats.comm_s += st.comm_s;
  if (sc_.clip_norm > 0) iv_.grad_norm = st.grad_norm;
  unconfirmed_.emplace_back(step, st);
  ++iv_.steps;
}

int Trainer::settle_nonfinite(bool all) {
  for (NonFiniteRecord r : all ? guard_->drain() : guard_->poll()) {
    CNN_CHECK(!unconfirmed_.empty() && unconfirmed_.front().first == r.step, "non-finite verdict for step %lld "
              "out of order", (long long)r.step);
    unconfirmed_.pop_front();
    const LossTotals t = losses_->take(r.step);  // landed with the record, queued before it
    r.local_loss_finite = std::isfinite(t.loss_sum);
    last_loss_ = t.loss_sum / s_.local_batch;
    if (!r.bad()) {
      iv_.loss_sum += t.loss_sum;
      iv_.correct += static_cast<int64_t>(t.correct);
      ++iv_.counted;
      continue;
    }
    if (scaler_->enabled()) {
      // fp16: a non-finite gradient is the loss scaler's overflow signal; it skipped the step and halved the
      // scale (the train events carry the scale and counts), so --train.on_nonfinite does not apply.
      ++iv_.skipped;
      ++skipped_total_;
      Json j;
      j.add("event", "skipped").add("step", r.step + 1).add("reason", "fp16_overflow")
          .add("skipped_total", skipped_total_);
      log_.event(j);
      continue;
    }
    if (cfg_.train.on_nonfinite == "stop") return stop_on_nonfinite(r);
    ++iv_.skipped;
    ++skipped_total_;
    log_.warn("%s; its update was skipped on every rank (--train.on_nonfinite skip; %lld step%s skipped so far)",
              describe_nonfinite(r, net_, obs_->hosts()).c_str(), (long long)skipped_total_,
              skipped_total_ == 1 ? "" : "s");
    Json j;
    j.add("event", "skipped").add("step", r.step + 1).add("reason", "nonfinite")
        .add("skipped_total", skipped_total_);
    log_.event(j);
  }
  return 0;
}

int Trainer::run() {
  t_start_ = Clock::now();
  prepare_run_dir();
  obs_ = std::make_unique<RunObserver>(make_obs_options(cfg_), be_, net_, log_, s_.binding);
  broadcast_initial_params();
  log_start();
  const Cursor start = plan();
  obs_->begin(run_dir_, start.step, total_, spe_);
  if (cfg_.eval_only) return evaluate_only(start);
  Loader loader(*s_.train, *sampler_, world_rank(), world_size(), cfg_.data.prefetch, start.epoch,
                start.step_in_epoch, std::max<int64_t>(0, total_ - start.step), make_augment_config(cfg_),
                input_->loader_output());
  t_ckpt_ = Clock::now();
  iv_ = Interval();
  if (stop_at_ > 0 && stop_at_ <= start.step) return stop_at_step({start.step, start.epoch, start.step_in_epoch});
  // A run resumed with nothing left to train still reports the test result of the weights it loaded (and of
  // their SWA average, whose statistics a final checkpoint holds: recomputed only where it does not).
  if (swa_ && start.step >= total_ && swa_->models() > 0 && !swa_->bn_current()) recompute_swa_bn();
  if (start.step >= total_ && start.step > 0 && s_.test)
    evaluate_and_log({(start.step - 1) / spe_, (start.step - 1) % spe_}, start.step - 1);
  const Batch* b = start.step < total_ ? &next_batch(loader) : nullptr;
  for (int64_t step = start.step; step < total_; ++step) {
    const BatchPos pos{b->epoch, b->step};
    if (pos.step == 0) apply_freeze(pos.epoch);
    const bool epoch_end = pos.step == spe_ - 1 || step == total_ - 1;
    const bool eval_due = epoch_end && s_.test && ((pos.epoch + 1) % cfg_.eval.every_epochs == 0 || step == total_ - 1);
    // Not before an evaluation: it uses the same input buffers.
    bool uploaded_next = false;
    train_one_step(step, [&] {
      if (step + 1 < total_ && !eval_due) {
        b = &next_batch(loader);
        uploaded_next = true;
      }
    });
    if (int rc = settle_nonfinite(false)) return rc;
    obs_->after_step(step + 1, last_loss_);
    obs_->maybe_histograms(step + 1);
    const bool log = (step + 1) % cfg_.log.every_steps == 0 || epoch_end;
    const Cursor next{step + 1, (step + 1) / spe_, (step + 1) % spe_};
    const int sig = agreed_stop_signal();
    const bool ckpt = !sig && checkpoint_due(next);
    const bool stop = next.step == stop_at_;
    // Logs, evaluations and checkpoints see only steps whose gradients were checked.
    if (log || eval_due || sig || ckpt || stop || step == total_ - 1) {
      if (int rc = settle_nonfinite(true)) return rc;
    }
    if (log) log_interval(pos, step);
    if (swa_ && epoch_end) swa_epoch_end(pos, step);
    if (eval_due) evaluate_and_log(pos, step);
    if (sig) return stop_on_signal(sig, next);
    if (stop) return stop_at_step(next);
    if (ckpt) {
      save_checkpoint(next);
      t_ckpt_ = Clock::now();
      iv_.start = Clock::now();
    }
    if (!uploaded_next && step + 1 < total_) b = &next_batch(loader);
  }
  return finish();
}

int run_training(const Config& cfg) {
  set_collective_timeout(cfg.comm.timeout_s);
  Setup s;
  int code = 0;
  std::string msg;
  try {
    s = local_setup(cfg);
  } catch (const Error& e) {
    code = e.code();
    msg = e.what();
  }
  agree_or_exit(code, msg);
  Trainer t(cfg, std::move(s));
  return t.run();
}

}  // namespace cnn
