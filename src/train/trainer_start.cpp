// The start of a run: its directory, the same initial weights on every rank, the start log, and the plan
// (sampler, schedule, optimizer, checkpoints, gradient sync) from which the step loop runs.
#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "src/comm/comm.h"
#include "src/comm/watchdog.h"
#include "src/train/env_switches.h"
#include "src/train/run_dir.h"
#include "src/train/trainer_run.h"

namespace cnn {

namespace {

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

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
            s_.test ? cfg_.data.test.c_str() : "");
  log_.info("model %s: %zu parameters, %.1f MFLOP/sample forward\n%s", cfg_.model.c_str(), net_.num_params(),
            net_.flops_per_sample() / 1e6, net_.summary().c_str());
  for (const std::string& w : s_.warnings) log_.warn("%s", w.c_str());
  const InitFromReport& init = s_.init;
  if (!cfg_.init.from.empty()) {
    log_.info("initial weights from %s (%s): %zu tensors; freshly initialised: %zu missing from the file%s%s, %zu of "
              "another shape%s%s, %zu skipped (--init.skip); %zu tensors of the file unused%s%s",
              cfg_.init.from.c_str(), init.format.c_str(), init.loaded, init.missing.size(),
              init.missing.empty() ? "" : ": ", join_names(init.missing).c_str(), init.mismatched.size(),
              init.mismatched.empty() ? "" : ": ", join_names(init.mismatched).c_str(), init.skipped.size(),
              init.unused.size(), init.unused.empty() ? "" : ": ", join_names(init.unused).c_str());
  }
  log_env_switches(log_);
  log_.info("precision %s: activations %.2f MB/sample%s", cfg_.precision.c_str(),
            net_.activation_bytes_per_sample() / 1e6,
            scaler_->enabled() ? strprintf(", dynamic loss scaling from %g", scaler_->scale()).c_str() : "");
  Json j;
  j.add("event", "start").add("world_size", world_size()).add("nodes", num_nodes()).add("device", cfg_.device)
      .add("model", cfg_.model).add("params", static_cast<int64_t>(net_.num_params()))
      .add("global_batch", static_cast<int64_t>(cfg_.train.batch)).add("train_samples", static_cast<int64_t>(ti.count))
      .add("seed", static_cast<int64_t>(cfg_.seed)).add("threads", cfg_.threads)
      .add("precision", cfg_.precision)
      .add("activation_bytes_per_sample", static_cast<int64_t>(net_.activation_bytes_per_sample()))
      .add("version", version_string()).add("hosts", obs_->hosts());
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) j.add("visible_gpus", std::string(v));
  if (!cfg_.init.from.empty())
    j.add("init_from", cfg_.init.from).add("init_loaded", static_cast<int64_t>(init.loaded))
        .add("init_fresh", init.fresh());
  add_env_switches(j);
  log_.event(j);
}

Cursor Trainer::plan() {
  const DatasetInfo& ti = s_.train->info();
  buf_ = alloc_step_buffers(be_, net_, s_.local_batch);
  input_ = std::make_unique<InputPath>(be_, buf_, ti);
  sampler_ = std::make_unique<Sampler>(ti.count, cfg_.train.batch, cfg_.seed);
  spe_ = sampler_->steps_per_epoch();
  total_ = spe_ * cfg_.train.epochs;
  if (cfg_.train.max_steps > 0) total_ = std::min(total_, cfg_.train.max_steps);
  sched_ = make_lr_schedule(cfg_, spe_, total_);
  // Optimizer state for what trains from the start only (apply_freeze lays it out for the resumed epoch).
  OptimizerConfig oc = make_optimizer_config(cfg_);
  oc.lr_mult = plan_freeze(net_, cfg_.train.freeze, cfg_.train.lr_mult).lr_mult;
  opt_ = make_optimizer(oc, be_, net_);
  if (cfg_.train.ema > 0) {
    const Net& net = net_;
    ema_ = std::make_unique<WeightEma>(be_, EmaConfig{cfg_.train.ema, cfg_.train.ema_warmup}, net.params(),
                                       net.num_params(), net_.buffers(), net.num_buffers());
  }
  plan_swa();
  ckpt_ = std::make_unique<RunCheckpoints>(cfg_, be_, net_, *opt_, *scaler_, log_, ckpt_dir_, ema_.get(), swa_.get());
  const Dims& in = net_.input_dims();
  ckpt_->set_model_info(model_info_of(ti, in.h, in.w, in.c));
  const Cursor start = ckpt_->resume();
  comm_ = make_collectives(cfg_, s_);
  ckpt_->set_collectives(comm_.get());
  ckpt_->set_graph(s_.graph);
  sc_ = make_step_config(cfg_);
  apply_freeze(start.epoch);
  ckpt_->restore_optimizer_state();
  sc_.ids = buf_.ids;
  if (make_augment_config(cfg_).mix.on()) sc_.mix = buf_.mix;  // the loader's batches carry draws
  guard_ = std::make_unique<NonFiniteGuard>(be_, net_.grads(), net_.num_params(), true);
  losses_ = std::make_unique<LossRing>(be_);
  guard_->arm_test_injection(net_, world_rank());
  be_.set_update_gate(guard_->d_flag());
  sc_.nonfinite = guard_.get();
  sc_.timing = &obs_->timing();
  sc_.scaler = scaler_.get();
  // AdamW and the weight average count only applied updates: with skipping on, the host learns the verdict
  // before the update.
  sc_.count_only_applied = (cfg_.train.optimizer == "adamw" || ema_) && cfg_.train.on_nonfinite == "skip";
  sc_.ema = ema_.get();
  if (cfg_.eval_only) return start;  // the training plan does not apply: evaluate_only runs instead
  log_.info("training %lld steps (%lld per epoch, global batch %lld = %d ranks x %d; last partial batch of each "
            "epoch dropped: %lld samples)", (long long)total_, (long long)spe_, (long long)cfg_.train.batch,
            world_size(), s_.local_batch, (long long)(ti.count - spe_ * cfg_.train.batch));
  if (start.step > 0) {
    // Readers of metrics.jsonl drop what an earlier process logged after this step (it is repeated).
    Json j;
    j.add("event", "resumed").add("step", start.step).add("from", ckpt_->resumed_from());
    log_.event(j);
  }
  if (start.step >= total_)
    log_.info("nothing left to train: the checkpoint is at step %lld of %lld", (long long)start.step,
              (long long)total_);
  if (cfg_.train.stop_at_step > 0 && cfg_.train.stop_at_step < total_) {
    stop_at_ = cfg_.train.stop_at_step;
    if (stop_at_ <= start.step)
      log_.info("--train.stop_at_step %lld: the run is already at step %lld; stopping without training",
                (long long)stop_at_, (long long)start.step);
    else
      log_.info("stopping after step %lld (--train.stop_at_step); the learning-rate schedule still runs to step %lld",
                (long long)stop_at_, (long long)total_);
  }
  return start;
}

}  // namespace cnn
