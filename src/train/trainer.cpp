// The run: run directory, logs, the step loop with its interval logging, evaluation, stop-on-signal and
// periodic checkpoints. Setup before the first collective is src/train/setup.cpp; what checkpoints hold and
// --resume is src/train/run_checkpoints.cpp; one step's math is src/train/step.cpp.
#include "src/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>

#include "io/loader.h"
#include "io/sampler.h"
#include "src/base/error.h"
#include "src/comm/collectives.h"
#include "src/comm/comm.h"
#include "src/comm/watchdog.h"
#include "src/obs/run_observer.h"
#include "src/train/env_switches.h"
#include "src/train/input_path.h"
#include "src/train/loss_ring.h"
#include "src/train/nonfinite.h"
#include "src/train/recipe.h"
#include "src/train/run_checkpoints.h"
#include "src/train/run_dir.h"
#include "src/train/runlog.h"
#include "src/train/schedule.h"
#include "src/train/setup.h"
#include "src/train/signals.h"
#include "src/train/step.h"

namespace cnn {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct EvalResult {
  double loss = 0, acc = 0;
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
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<RunCheckpoints> ckpt_;
  std::unique_ptr<Collectives> comm_;  // before sync_, which uses it
  std::unique_ptr<GradSync> sync_;
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
  EvalResult last_eval_;
  bool have_eval_ = false;
};

void Trainer::prepare_run_dir() {
  run_dir_ = cfg_.run_dir.empty() ? default_run_dir(cfg_) : cfg_.run_dir;
  broadcast(run_dir_, 0);  // rank 0's clock names the default directory for everyone
  int code = 0;
  std::string msg;
  if (world_rank() == 0) {
    try {
      // Before anything is written: a refused run leaves the directory as it was.
      const RunIdentity id = run_identity(cfg_, net_);
      const std::vector<std::string> warnings = check_run_dir(run_dir_, cfg_, id);
      mkdir_p(run_dir_);
      std::string path = run_dir_ + "/config.ini";
      std::ofstream f(path);
      f << config_to_ini(cfg_);
      if (!f.good()) raise(kExitUsage, "cannot write '%s' (check --run-dir)", path.c_str());
      write_run_identity(run_dir_, id);
      log_.open(run_dir_, true);
      for (const auto& w : warnings) log_.warn("%s", w.c_str());
    } catch (const Error& e) {
      code = e.code();
      msg = e.what();
    }
  }
  agree_or_exit(code, msg);
  set_error_log_path(run_dir_ + "/log.txt");
  ckpt_dir_ = run_dir_ + "/checkpoints";
  // The collective watchdog's side channel (src/comm/heartbeat.h): shared like the checkpoints.
  const std::string heartbeat_dir = run_dir_ + "/heartbeat";
  if (world_rank() == 0) {
    mkdir_p(ckpt_dir_);
    mkdir_p(heartbeat_dir);
    if (int n = remove_stale_tmp(ckpt_dir_)) log_.warn("removed %d unfinished checkpoint file(s) in %s", n,
                                                       ckpt_dir_.c_str());
  }
  barrier();
  start_watchdog(heartbeat_dir);
}

void Trainer::broadcast_initial_params() {
  // Identical initialisation is guaranteed by the seed; broadcasting makes it independent of libm too.
  std::vector<float> host(net_.num_params());
  be_.download(host.data(), net_.params(), sizeof(float) * host.size());
  broadcast(host.data(), sizeof(float) * host.size(), 0);
  be_.upload(net_.params(), host.data(), sizeof(float) * host.size());
  net_.sync_weight_copy();
}

void Trainer::log_start() {
  const DatasetInfo& ti = s_.train->info();
  std::string topo = topology_summary();
  log_.info("%s", version_string().c_str());
  log_.info("%s, device %s, %d thread%s/rank", topo.c_str(), cfg_.device.c_str(), cfg_.threads,
            cfg_.threads == 1 ? "" : "s");
  log_.info("run directory: %s", run_dir_.c_str());
  if (cfg_.device != "cpu") {
    const std::string table = gather_binding_table(s_.binding);  // collective
    log_.info("%s", table.c_str());
  }
  log_.info("train: %s (%lld samples, %dx%dx%d, %d classes)%s%s", s_.train->path().c_str(), (long long)ti.count,
            ti.height, ti.width, ti.channels, ti.num_classes, s_.test ? ", test: " : "",
            s_.test ? cfg_.data_test.c_str() : "");
  log_.info("model %s: %zu parameters, %.1f MFLOP/sample forward\n%s", cfg_.model.c_str(), net_.num_params(),
            net_.flops_per_sample() / 1e6, net_.summary().c_str());
  log_env_switches(log_);
  log_.info("precision %s: activations %.2f MB/sample%s", cfg_.precision.c_str(),
            net_.activation_bytes_per_sample() / 1e6,
            scaler_->enabled() ? strprintf(", dynamic loss scaling from %g", scaler_->scale()).c_str() : "");
  Json j;
  j.add("event", "start").add("world_size", world_size()).add("nodes", num_nodes()).add("device", cfg_.device)
      .add("model", cfg_.model).add("params", static_cast<int64_t>(net_.num_params()))
      .add("global_batch", static_cast<int64_t>(cfg_.batch)).add("train_samples", static_cast<int64_t>(ti.count))
      .add("seed", static_cast<int64_t>(cfg_.seed)).add("threads", cfg_.threads)
      .add("precision", cfg_.precision)
      .add("activation_bytes_per_sample", static_cast<int64_t>(net_.activation_bytes_per_sample()))
      .add("version", version_string()).add("hosts", obs_->hosts());
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) j.add("visible_gpus", std::string(v));
  add_env_switches(j);
  log_.event(j);
}

Cursor Trainer::plan() {
  const DatasetInfo& ti = s_.train->info();
  buf_ = alloc_step_buffers(be_, net_, s_.local_batch);
  input_ = std::make_unique<InputPath>(be_, buf_, ti);
  sampler_ = std::make_unique<Sampler>(ti.count, cfg_.batch, cfg_.seed);
  spe_ = sampler_->steps_per_epoch();
  total_ = spe_ * cfg_.epochs;
  if (cfg_.max_steps > 0) total_ = std::min(total_, cfg_.max_steps);
  sched_ = make_lr_schedule(cfg_, spe_, total_);
  opt_ = make_optimizer(make_optimizer_config(cfg_), be_, net_);
  ckpt_ = std::make_unique<RunCheckpoints>(cfg_, be_, net_, *opt_, *scaler_, log_, ckpt_dir_);
  const Cursor start = ckpt_->resume();
  comm_ = make_collectives(cfg_, s_);
  if (comm_) {
    GradSyncOptions go;
    go.bucket_bytes = static_cast<size_t>(cfg_.comm_bucket_mb * 1048576.0);
    go.overlap = cfg_.comm_overlap;
    go.wire = cfg_.comm_grad_dtype == "bf16"   ? GradWire::kBF16
              : cfg_.comm_grad_dtype == "fp16" ? GradWire::kF16
                                               : GradWire::kF32;
    sync_ = comm_->make_grad_sync(net_.grads(), net_.num_params(), go);
    log_.info("gradient sync: %s; summed in %s%s; %zu bucket%s of up to %.3g MiB, %s; collective timeout %.0f s",
              comm_->describe().c_str(), cfg_.comm_grad_dtype.c_str(),
              go.wire == GradWire::kF32 ? "" : " (rounded from the fp32 gradient, widened back after the sum)",
              sync_->num_buckets(), sync_->num_buckets() == 1 ? "" : "s", cfg_.comm_bucket_mb,
              cfg_.comm_overlap ? "started during backward" : "started after backward (--comm.overlap false)",
              cfg_.comm_timeout_s);
  }
  sc_ = make_step_config(cfg_);
  sc_.ids = buf_.ids;
  guard_ = std::make_unique<NonFiniteGuard>(be_, net_.grads(), net_.num_params(), true);
  losses_ = std::make_unique<LossRing>(be_);
  guard_->arm_test_injection(net_, world_rank());
  be_.set_update_gate(guard_->d_flag());
  sc_.nonfinite = guard_.get();
  sc_.timing = &obs_->timing();
  sc_.scaler = scaler_.get();
  sc_.count_only_applied = cfg_.optimizer == "adamw" && cfg_.on_nonfinite == "skip";
  log_.info("training %lld steps (%lld per epoch, global batch %lld = %d ranks x %d; last partial batch of each "
            "epoch dropped: %lld samples)", (long long)total_, (long long)spe_, (long long)cfg_.batch, world_size(),
            s_.local_batch, (long long)(ti.count - spe_ * cfg_.batch));
  if (start.step > 0) {
    // Readers of metrics.jsonl drop what an earlier process logged after this step (it is repeated).
    Json j;
    j.add("event", "resumed").add("step", start.step).add("from", ckpt_->resumed_from());
    log_.event(j);
  }
  if (start.step >= total_)
    log_.info("nothing left to train: the checkpoint is at step %lld of %lld", (long long)start.step,
              (long long)total_);
  if (cfg_.stop_at_step > 0 && cfg_.stop_at_step < total_) {
    stop_at_ = cfg_.stop_at_step;
    if (stop_at_ <= start.step)
      log_.info("--train.stop_at_step %lld: the run is already at step %lld; stopping without training",
                (long long)stop_at_, (long long)start.step);
    else
      log_.info("stopping after step %lld (--train.stop_at_step); the learning-rate schedule still runs to step %lld",
                (long long)stop_at_, (long long)total_);
  }
  return start;
}

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
    if (cfg_.on_nonfinite == "stop") return stop_on_nonfinite(r);
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
  allreduce_sum(sums, 2);
  const double samples = static_cast<double>(iv_.steps) * cfg_.batch;
  const double counted = static_cast<double>(iv_.counted) * cfg_.batch;
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

EvalResult Trainer::evaluate() {
  Dataset& ds = *s_.test;
  const DatasetInfo& info = ds.info();
  auto [begin, end] = shard_range(info.count, world_rank(), world_size());
  std::vector<int64_t> ids;
  std::vector<uint8_t> raw;
  std::vector<int32_t> lab;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += cfg_.eval_batch) {
    int n = static_cast<int>(std::min<int64_t>(cfg_.eval_batch, end - i));
    ids.resize(n);
    for (int j = 0; j < n; ++j) ids[j] = i + j;
    raw.resize(n * info.sample_bytes());
    lab.resize(n);
    ds.read(ids.data(), n, raw.data(), lab.data());
    input_->upload_eval(raw.data(), lab.data(), n, info);
    const void* logits = net_.forward(buf_.x, n, false);
    softmax_xent(be_, net_.dtype(), n, net_.num_classes(), logits, buf_.labels, 0.f, 1.f, nullptr, &loss, &correct);
  }
  double sums[3] = {loss, static_cast<double>(correct), static_cast<double>(end - begin)};
  allreduce_sum(sums, 3);
  return {sums[0] / sums[2], sums[1] / sums[2], static_cast<int64_t>(sums[2])};
}

void Trainer::evaluate_and_log(const BatchPos& b, int64_t step) {
  auto te = Clock::now();
  average_buffers(be_, net_);
  last_eval_ = evaluate();
  have_eval_ = true;
  log_.info("epoch %lld: test loss %.4f test accuracy %.2f%% (%lld images, %.1f s)", (long long)b.epoch + 1,
            last_eval_.loss, 100 * last_eval_.acc, (long long)last_eval_.count, since(te));
  Json j;
  j.add("event", "eval").add("epoch", b.epoch + 1).add("step", step + 1).add("test_loss", last_eval_.loss)
      .add("test_acc", last_eval_.acc).add("count", last_eval_.count);
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
  bool due = cfg_.ckpt_every_steps > 0 && next.step % cfg_.ckpt_every_steps == 0;
  if (cfg_.ckpt_every_seconds > 0) {
    // Clocks differ between nodes: rank 0 decides and everyone follows.
    int d = since(t_ckpt_) >= cfg_.ckpt_every_seconds ? 1 : 0;
    broadcast(&d, sizeof d, 0);
    due = due || d;
  }
  // The end-of-run checkpoint (finish) covers the last step, stop_at_step its own.
  return due && (next.step < total_ || !cfg_.ckpt_at_end) && next.step != stop_at_;
}

void Trainer::save_checkpoint(const Cursor& next) {
  const auto t = Clock::now();
  ckpt_->save(next);
  obs_->timing().add(Phase::kCheckpoint, since(t));
}

int Trainer::finish() {
  obs_->finish();
  if (cfg_.ckpt_at_end && total_ > 0 && ckpt_->last_step() != total_) ckpt_->save({total_, total_ / spe_, total_ % spe_});
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

int Trainer::run() {
  t_start_ = Clock::now();
  prepare_run_dir();
  obs_ = std::make_unique<RunObserver>(cfg_, be_, net_, log_, s_.binding);
  broadcast_initial_params();
  log_start();
  const Cursor start = plan();
  obs_->begin(run_dir_, start.step, total_, spe_);
  Loader loader(*s_.train, *sampler_, world_rank(), world_size(), cfg_.data_prefetch, start.epoch,
                start.step_in_epoch, std::max<int64_t>(0, total_ - start.step), make_augment_config(cfg_),
                input_->loader_output());
  t_ckpt_ = Clock::now();
  iv_ = Interval();
  if (stop_at_ > 0 && stop_at_ <= start.step) return stop_at_step({start.step, start.epoch, start.step_in_epoch});
  // A run resumed with nothing left to train still reports the test result of the weights it loaded.
  if (start.step >= total_ && start.step > 0 && s_.test)
    evaluate_and_log({(start.step - 1) / spe_, (start.step - 1) % spe_}, start.step - 1);
  const Batch* b = start.step < total_ ? &next_batch(loader) : nullptr;
  for (int64_t step = start.step; step < total_; ++step) {
    const BatchPos pos{b->epoch, b->step};
    const bool epoch_end = pos.step == spe_ - 1 || step == total_ - 1;
    const bool eval_due = epoch_end && s_.test && ((pos.epoch + 1) % cfg_.eval_every_epochs == 0 || step == total_ - 1);
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
    const bool log = (step + 1) % cfg_.log_every_steps == 0 || epoch_end;
    const Cursor next{step + 1, (step + 1) / spe_, (step + 1) % spe_};
    const int sig = agreed_stop_signal();
    const bool ckpt = !sig && checkpoint_due(next);
    const bool stop = next.step == stop_at_;
    // Logs, evaluations and checkpoints see only steps whose gradients were checked.
    if (log || eval_due || sig || ckpt || stop || step == total_ - 1) {
      if (int rc = settle_nonfinite(true)) return rc;
    }
    if (log) log_interval(pos, step);
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

}  // namespace

int run_training(const Config& cfg) {
  set_collective_timeout(cfg.comm_timeout_s);
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
