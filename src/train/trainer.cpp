#include "src/train/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <memory>

#include "io/dataset.h"
#include "io/hdf5_dataset.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_env.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "kernels/backend.h"
#include "kernels/cuda_backend.h"
#include "src/checkpoint/checkpoint.h"
#include "src/comm/comm.h"
#include "src/base/error.h"
#include "src/comm/grad_sync.h"
#include "src/model/zoo.h"
#include "src/model/net.h"
#include "src/train/optimizer.h"
#include "src/train/recipe.h"
#include "src/train/runlog.h"
#include "src/train/schedule.h"
#include "src/train/signals.h"
#include "src/train/step.h"

namespace cnn {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::unique_ptr<Dataset> open_data(const Config& cfg, const std::string& path, bool train) {
  if (cfg.data_format == "hdf5" || (cfg.data_format == "auto" && !looks_like_lmdb(path))) {
    Hdf5ReadOptions o;
    o.chunk_cache_mb = static_cast<size_t>(cfg.data_cache_mb);
    return open_hdf5_dataset(path, o);
  }
  LmdbOptions o;
  o.on_bad_sample = cfg.data_on_bad_sample;
  o.read_threads = cfg.data_read_threads;
  if (!cfg.data_image_size.empty()) {
    std::sscanf(cfg.data_image_size.c_str(), "%dx%d", &o.transform.height, &o.transform.width);
    o.transform.mode = train ? ResizeMode::kRandomResizedCrop : ResizeMode::kCenterCrop;
    o.transform.seed = cfg.seed;
  }
  return open_lmdb_dataset(path, o);
}

std::unique_ptr<Backend> make_backend(const Config& cfg) {
  if (cfg.device == "cpu") return make_cpu_backend(cfg.threads);
  if (cfg.device == "emu") return make_emu_backend();
#ifdef CNN_WITH_CUDA
  if (cfg.device == "cuda") {
    // GradSync hands gradient buffers to MPI; device pointers need the NCCL path, which is not written yet.
    if (world_size() > 1)
      raise(kExitUsage, "option --device cuda: multi-rank GPU training needs NCCL gradient averaging, which this "
            "version lacks; run one rank, or use --device cpu or emu");
    return make_cuda_backend(local_rank());
  }
#endif
  raise(kExitUsage, "option --device: '%s' is not available in this build (built without CUDA: USE_CUDA=0 or no "
        "nvcc); use --device cpu or emu", cfg.device.c_str());
}

void mkdir_p(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
        raise(kExitUsage, "cannot create run directory '%s': %s (check --run-dir)", cur.c_str(),
              std::strerror(errno));
    }
    if (i < path.size()) cur += path[i];
  }
}

struct Setup {
  std::unique_ptr<Dataset> train, test;
  std::unique_ptr<Backend> be;
  std::unique_ptr<Net> net;
  int local_batch = 0;
};

// Everything a rank can get wrong on its own, before any collective: files, shapes, batch, model.
Setup local_setup(const Config& cfg) {
  Setup s;
  const int world = world_size();
  if (cfg.batch % world != 0)
    raise(kExitUsage, "option --train.batch: the global batch %lld is not divisible by the %d ranks; choose a "
          "multiple of %d", (long long)cfg.batch, world, world);
  s.local_batch = static_cast<int>(cfg.batch / world);
  if (s.local_batch % cfg.accum_steps != 0)
    raise(kExitUsage, "option --train.accum_steps: the per-rank batch %d (%lld / %d ranks) is not divisible by %d "
          "micro-batches", s.local_batch, (long long)cfg.batch, world, cfg.accum_steps);
  const int micro = s.local_batch / cfg.accum_steps;
  if (cfg.bn_group > 0 && micro % cfg.bn_group != 0)
    raise(kExitUsage, "option --bn.group_size: the per-rank micro-batch of %d samples is not a multiple of %d",
          micro, cfg.bn_group);
  s.train = open_data(cfg, cfg.data_train, true);
  const DatasetInfo& ti = s.train->info();
  if (ti.count < cfg.batch)
    raise(kExitData, "training set '%s' has %lld samples, fewer than one global batch (%lld); lower "
          "--train.batch", cfg.data_train.c_str(), (long long)ti.count, (long long)cfg.batch);
  if (!cfg.data_test.empty()) {
    s.test = open_data(cfg, cfg.data_test, false);
    const DatasetInfo& e = s.test->info();
    if (e.height != ti.height || e.width != ti.width || e.channels != ti.channels)
      raise(kExitData, "test set '%s' has %dx%dx%d images but the training set '%s' has %dx%dx%d",
            cfg.data_test.c_str(), e.height, e.width, e.channels, cfg.data_train.c_str(), ti.height, ti.width,
            ti.channels);
    if (e.num_classes > ti.num_classes)
      raise(kExitData, "test set '%s' has %d classes but the training set has %d", cfg.data_test.c_str(),
            e.num_classes, ti.num_classes);
  }
  s.be = make_backend(cfg);
  s.net = std::make_unique<Net>(*s.be, Dims{ti.height, ti.width, ti.channels}, ti.num_classes);
  build_model(cfg.model, *s.net, make_model_options(cfg));
  s.net->build(std::max(s.local_batch / cfg.accum_steps, cfg.eval_batch), cfg.seed);
  return s;
}

std::string default_run_dir(const Config& cfg) {
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + cfg.model + "-" + ts;
}

struct EvalResult {
  double loss = 0, acc = 0;
  int64_t count = 0;
};

class Trainer {
 public:
  Trainer(const Config& cfg, Setup s) : cfg_(cfg), s_(std::move(s)), be_(*s_.be), net_(*s_.net) {}
  ~Trainer() { free_step_buffers(be_, buf_); }
  int run();

 private:
  struct Cursor {
    int64_t step = 0, epoch = 0, step_in_epoch = 0;
  };
  void prepare_run_dir();
  std::vector<CheckpointArray> checkpoint_arrays();
  void save_checkpoint(const Cursor& next);
  Cursor resume();
  void log_start();
  EvalResult evaluate();
  void upload_batch(const float* images, const int32_t* labels, int n);

  const Config& cfg_;
  Setup s_;
  Backend& be_;
  Net& net_;
  RunLog log_;
  std::string run_dir_, ckpt_dir_;
  StepBuffers buf_;
  std::unique_ptr<Optimizer> opt_;
  int64_t spe_ = 1;
  // Host copies of the parameters and optimizer state for checkpoints.
  std::vector<float> host_params_, host_buffers_;
  std::vector<std::vector<float>> host_state_;
  int64_t last_ckpt_step_ = -1;
};

std::vector<CheckpointArray> Trainer::checkpoint_arrays() {
  std::vector<CheckpointArray> v;
  auto states = opt_->state();
  host_params_.resize(net_.num_params());
  host_state_.resize(states.size());
  for (const ParamInfo& p : net_.param_table())
    v.push_back({"params/" + p.name, p.shape, host_params_.data() + p.offset});
  host_buffers_.resize(net_.num_buffers());
  for (const ParamInfo& b : net_.buffer_table())
    v.push_back({"buffers/" + b.name, b.shape, host_buffers_.data() + b.offset});
  for (size_t k = 0; k < states.size(); ++k) {
    host_state_[k].resize(net_.num_params());
    for (const ParamInfo& p : net_.param_table())
      v.push_back({"optimizer/" + states[k].first + "/" + p.name, p.shape, host_state_[k].data() + p.offset});
  }
  return v;
}

void Trainer::save_checkpoint(const Cursor& next) {
  // Batch-norm running statistics differ per rank (local batches): save their mean, and keep using it, so a
  // resumed run continues from exactly the state the uninterrupted run has.
  average_buffers(be_, net_);
  auto arrays = checkpoint_arrays();
  auto states = opt_->state();
  be_.download(host_params_.data(), net_.params(), sizeof(float) * net_.num_params());
  be_.download(host_buffers_.data(), net_.buffers(), sizeof(float) * net_.num_buffers());
  for (size_t k = 0; k < states.size(); ++k)
    be_.download(host_state_[k].data(), states[k].second, sizeof(float) * net_.num_params());
  CheckpointMeta m;
  m.step = next.step;
  m.epoch = next.epoch;
  m.step_in_epoch = next.step_in_epoch;
  m.global_batch = cfg_.batch;
  m.samples_seen = next.step * cfg_.batch;
  m.seed = cfg_.seed;
  m.world_size = world_size();
  m.model = cfg_.model;
  m.optimizer = cfg_.optimizer;
  m.config = config_to_ini(cfg_);
  m.version = version_string();
  const std::string path = ckpt_dir_ + "/" + checkpoint_name(next.step);
  CheckpointWriteStats st = write_checkpoint(path, arrays, m);
  last_ckpt_step_ = next.step;
  std::vector<std::string> pruned;
  if (world_rank() == 0) pruned = prune_checkpoints(ckpt_dir_, cfg_.ckpt_keep);
  log_.info("checkpoint %s: %.1f MB in %.2f s (%.0f MB/s)%s", path.c_str(), st.bytes / 1e6, st.seconds,
            st.bytes / 1e6 / std::max(st.seconds, 1e-9),
            pruned.empty() ? "" : strprintf(", removed %zu old", pruned.size()).c_str());
  Json j;
  j.add("event", "checkpoint").add("step", next.step).add("path", path).add("bytes", static_cast<int64_t>(st.bytes))
      .add("seconds", st.seconds);
  log_.event(j);
}

Trainer::Cursor Trainer::resume() {
  Cursor c;
  if (cfg_.resume == "none") return c;
  const bool explicit_path = cfg_.resume != "auto";
  std::string listing;
  if (world_rank() == 0) {
    if (explicit_path) {
      listing = cfg_.resume;
    } else {
      for (const auto& p : list_checkpoints(ckpt_dir_)) listing += p + "\n";
    }
  }
  broadcast(listing, 0);  // one rank's view of the directory decides, so all try the same files
  std::vector<std::string> candidates;
  for (size_t a = 0, b; a < listing.size(); a = b + 1) {
    b = listing.find('\n', a);
    if (b == std::string::npos) b = listing.size();
    if (b > a) candidates.push_back(listing.substr(a, b - a));
  }
  if (candidates.empty()) {
    log_.info("resume auto: no checkpoint in %s, starting from scratch", ckpt_dir_.c_str());
    return c;
  }
  auto arrays = checkpoint_arrays();
  auto states = opt_->state();
  for (const auto& path : candidates) {
    CheckpointMeta m;
    std::string err;
    bool ok = read_checkpoint(path, arrays, m, err);
    if (ok && m.global_batch != cfg_.batch) {
      // Same verdict everywhere; a different batch changes the global batch sequence, so no exact continuation.
      agree_or_exit(kExitCheckpoint, strprintf("checkpoint '%s' was written with global batch %lld; resume with "
                    "--train.batch %lld (the rank count may differ)", path.c_str(), (long long)m.global_batch,
                    (long long)m.global_batch));
    }
    if (ok) {
      be_.upload(net_.params(), host_params_.data(), sizeof(float) * net_.num_params());
      be_.upload(net_.buffers(), host_buffers_.data(), sizeof(float) * net_.num_buffers());
      for (size_t k = 0; k < states.size(); ++k)
        be_.upload(states[k].second, host_state_[k].data(), sizeof(float) * net_.num_params());
      opt_->set_steps(m.step);  // one update per optimizer step: AdamW's bias correction continues exactly
      c.step = m.step;
      c.epoch = m.epoch;
      c.step_in_epoch = m.step_in_epoch;
      last_ckpt_step_ = m.step;
      if (m.seed != cfg_.seed)
        log_.warn("checkpoint %s was written with seed %llu, this run uses %llu: the data order changes",
                  path.c_str(), (unsigned long long)m.seed, (unsigned long long)cfg_.seed);
      log_.info("resumed from %s: step %lld, epoch %lld, written by %d rank%s (now %d)", path.c_str(),
                (long long)m.step, (long long)m.epoch + 1, m.world_size, m.world_size == 1 ? "" : "s", world_size());
      return c;
    }
    if (explicit_path) agree_or_exit(kExitCheckpoint, err + "; fix --resume or use --resume auto/none");
    log_.warn("skipping checkpoint: %s; trying an older one", err.c_str());
  }
  log_.warn("no checkpoint in %s verifies; starting from scratch", ckpt_dir_.c_str());
  return c;
}

void Trainer::prepare_run_dir() {
  run_dir_ = cfg_.run_dir.empty() ? default_run_dir(cfg_) : cfg_.run_dir;
  broadcast(run_dir_, 0);  // rank 0's clock names the default directory for everyone
  int code = 0;
  std::string msg;
  if (world_rank() == 0) {
    try {
      mkdir_p(run_dir_);
      std::string path = run_dir_ + "/config.ini";
      std::ofstream f(path);
      f << config_to_ini(cfg_);
      if (!f.good()) raise(kExitUsage, "cannot write '%s' (check --run-dir)", path.c_str());
      log_.open(run_dir_, true);
    } catch (const Error& e) {
      code = e.code();
      msg = e.what();
    }
  }
  agree_or_exit(code, msg);
  set_error_log_path(run_dir_ + "/log.txt");
  ckpt_dir_ = run_dir_ + "/checkpoints";
  if (world_rank() == 0) {
    mkdir_p(ckpt_dir_);
    if (int n = remove_stale_tmp(ckpt_dir_)) log_.warn("removed %d unfinished checkpoint file(s) in %s", n,
                                                       ckpt_dir_.c_str());
  }
  barrier();
}

void Trainer::log_start() {
  const DatasetInfo& ti = s_.train->info();
  std::string topo = topology_summary();
  log_.info("%s", version_string().c_str());
  log_.info("%s, device %s, %d thread%s/rank", topo.c_str(), cfg_.device.c_str(), cfg_.threads,
            cfg_.threads == 1 ? "" : "s");
  log_.info("run directory: %s", run_dir_.c_str());
  log_.info("train: %s (%lld samples, %dx%dx%d, %d classes)%s%s", cfg_.data_train.c_str(), (long long)ti.count,
            ti.height, ti.width, ti.channels, ti.num_classes, s_.test ? ", test: " : "",
            s_.test ? cfg_.data_test.c_str() : "");
  log_.info("model %s: %zu parameters, %.1f MFLOP/sample forward\n%s", cfg_.model.c_str(), net_.num_params(),
            net_.flops_per_sample() / 1e6, net_.summary().c_str());
  Json j;
  j.add("event", "start").add("world_size", world_size()).add("nodes", num_nodes()).add("device", cfg_.device)
      .add("model", cfg_.model).add("params", static_cast<int64_t>(net_.num_params()))
      .add("global_batch", static_cast<int64_t>(cfg_.batch)).add("train_samples", static_cast<int64_t>(ti.count))
      .add("seed", static_cast<int64_t>(cfg_.seed)).add("threads", cfg_.threads)
      .add("version", version_string());
  log_.event(j);
}

void Trainer::upload_batch(const float* images, const int32_t* labels, int n) {
  const size_t px = net_.input_dims().size();
  be_.upload(buf_.x, images, sizeof(float) * px * n);
  be_.upload(buf_.labels, labels, sizeof(int32_t) * n);
}

EvalResult Trainer::evaluate() {
  Dataset& ds = *s_.test;
  const DatasetInfo& info = ds.info();
  const DatasetInfo& norm = s_.train->info();  // the test set is normalised like the training set
  auto [begin, end] = shard_range(info.count, world_rank(), world_size());
  std::vector<int64_t> ids;
  std::vector<uint8_t> raw;
  std::vector<float> img;
  std::vector<int32_t> lab;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += cfg_.eval_batch) {
    int n = static_cast<int>(std::min<int64_t>(cfg_.eval_batch, end - i));
    ids.resize(n);
    for (int j = 0; j < n; ++j) ids[j] = i + j;
    raw.resize(n * info.sample_bytes());
    img.resize(raw.size());
    lab.resize(n);
    ds.read(ids.data(), n, raw.data(), lab.data());
    normalize_images(raw.data(), static_cast<size_t>(n) * info.height * info.width, info.channels, norm.mean,
                     norm.std, img.data());
    upload_batch(img.data(), lab.data(), n);
    const float* logits = net_.forward(buf_.x, n, false);
    be_.softmax_xent(n, net_.num_classes(), logits, buf_.labels, 0.f, 1.f, nullptr, &loss, &correct);
  }
  double sums[3] = {loss, static_cast<double>(correct), static_cast<double>(end - begin)};
  allreduce_sum(sums, 3);
  return {sums[0] / sums[2], sums[1] / sums[2], static_cast<int64_t>(sums[2])};
}

int Trainer::run() {
  auto t_start = Clock::now();
  prepare_run_dir();
  // Identical initialisation is guaranteed by the seed; broadcasting makes it independent of libm too.
  {
    std::vector<float> host(net_.num_params());
    be_.download(host.data(), net_.params(), sizeof(float) * host.size());
    broadcast(host.data(), sizeof(float) * host.size(), 0);
    be_.upload(net_.params(), host.data(), sizeof(float) * host.size());
  }
  log_start();

  const DatasetInfo& ti = s_.train->info();
  buf_ = alloc_step_buffers(be_, net_, s_.local_batch);

  Sampler sampler(ti.count, cfg_.batch, cfg_.seed);
  const int64_t spe = sampler.steps_per_epoch();
  int64_t total = spe * cfg_.epochs;
  if (cfg_.max_steps > 0) total = std::min(total, cfg_.max_steps);
  LrSchedule sched = make_lr_schedule(cfg_, spe, total);
  opt_ = make_optimizer(make_optimizer_config(cfg_), be_, net_);
  spe_ = spe;
  const Cursor start = resume();
  GradSync sync(net_.grads(), net_.num_params(), 25u << 20);
  log_.info("training %lld steps (%lld per epoch, global batch %lld = %d ranks x %d; last partial batch of each "
            "epoch dropped: %lld samples)", (long long)total, (long long)spe, (long long)cfg_.batch, world_size(),
            s_.local_batch, (long long)(ti.count - spe * cfg_.batch));

  if (start.step >= total) log_.info("nothing left to train: the checkpoint is at step %lld of %lld",
                                     (long long)start.step, (long long)total);
  Loader loader(*s_.train, sampler, world_rank(), world_size(), cfg_.data_prefetch, start.epoch,
                start.step_in_epoch, std::max<int64_t>(0, total - start.step), make_augment_config(cfg_));
  StepConfig sc = make_step_config(cfg_);
  sc.ids = buf_.ids;
  auto t_ckpt = Clock::now();
  StepStats acc;
  double t_data = 0, t_compute = 0;
  int64_t acc_steps = 0;
  auto t_interval = Clock::now();
  EvalResult last_eval;
  bool have_eval = false;
  for (int64_t step = start.step; step < total; ++step) {
    double wait = 0;
    const Batch& b = loader.next(&wait);
    t_data += wait;
    auto t0 = Clock::now();
    upload_batch(b.images.data(), b.labels.data(), b.n);
    be_.upload(buf_.ids, b.ids.data(), sizeof(int64_t) * b.n);
    const double lr = sched.at(step);
    const double comm_before = acc.comm_s;
    sc.step = step;
    train_step(be_, net_, *opt_, &sync, buf_, b.n, sc, lr, acc);
    be_.synchronize();
    t_compute += since(t0) - (acc.comm_s - comm_before);
    ++acc_steps;

    const bool epoch_end = b.step == spe - 1 || step == total - 1;
    if ((step + 1) % cfg_.log_every_steps == 0 || epoch_end) {
      double sums[2] = {acc.loss_sum, static_cast<double>(acc.correct)};
      allreduce_sum(sums, 2);
      const double samples = static_cast<double>(acc_steps) * cfg_.batch;
      const double wall = since(t_interval);
      const double loss = sums[0] / samples, tacc = sums[1] / samples;
      log_.info("epoch %lld step %lld/%lld (global %lld) loss %.4f train-acc %.2f%% lr %.5f %.0f samples/s "
                "(data %.0f%% comm %.0f%%)", (long long)b.epoch + 1, (long long)b.step + 1, (long long)spe,
                (long long)step + 1, loss, 100 * tacc, lr, samples / wall, 100 * t_data / wall, 100 * acc.comm_s / wall);
      Json j;
      j.add("event", "train").add("epoch", b.epoch + 1).add("step", step + 1).add("loss", loss)
          .add("train_acc", tacc).add("lr", lr).add("samples_per_s", samples / wall).add("data_s", t_data)
          .add("compute_s", t_compute).add("comm_s", acc.comm_s).add("steps", acc_steps);
      log_.event(j);
      acc = StepStats();
      t_data = t_compute = 0;
      acc_steps = 0;
      t_interval = Clock::now();
    }
    if (epoch_end && s_.test && ((b.epoch + 1) % cfg_.eval_every_epochs == 0 || step == total - 1)) {
      auto te = Clock::now();
      average_buffers(be_, net_);
      last_eval = evaluate();
      have_eval = true;
      log_.info("epoch %lld: test loss %.4f test accuracy %.2f%% (%lld images, %.1f s)", (long long)b.epoch + 1,
                last_eval.loss, 100 * last_eval.acc, (long long)last_eval.count, since(te));
      Json j;
      j.add("event", "eval").add("epoch", b.epoch + 1).add("step", step + 1).add("test_loss", last_eval.loss)
          .add("test_acc", last_eval.acc).add("count", last_eval.count);
      log_.event(j);
      t_interval = Clock::now();  // evaluation time is not training throughput
    }
    const Cursor next{step + 1, (step + 1) / spe, (step + 1) % spe};
    // Every rank learns of a signal any rank received, so all stop after the same step.
    if (int sig = allreduce_max(stop_signal())) {
      log_.warn("received %s: writing a checkpoint at step %lld and stopping (exit %d; resume with --resume "
                "auto)", signal_name(sig), (long long)next.step, kExitPreempted);
      save_checkpoint(next);
      Json j;
      j.add("event", "end").add("status", "preempted").add("reason", signal_name(sig)).add("steps", next.step)
          .add("final_test_acc", have_eval ? last_eval.acc : NAN).add("wall_s", since(t_start));
      log_.event(j);
      return kExitPreempted;
    }
    bool due = cfg_.ckpt_every_steps > 0 && next.step % cfg_.ckpt_every_steps == 0;
    if (cfg_.ckpt_every_seconds > 0) {
      // Clocks differ between nodes: rank 0 decides and everyone follows.
      int d = since(t_ckpt) >= cfg_.ckpt_every_seconds ? 1 : 0;
      broadcast(&d, sizeof d, 0);
      due = due || d;
    }
    if (due && (next.step < total || !cfg_.ckpt_at_end)) {
      save_checkpoint(next);
      t_ckpt = Clock::now();
      t_interval = Clock::now();
    }
  }
  if (cfg_.ckpt_at_end && total > 0 && last_ckpt_step_ != total) save_checkpoint({total, total / spe, total % spe});
  const double wall = since(t_start);
  if (have_eval)
    log_.info("completed %lld steps in %.1f s; final test accuracy %.2f%%", (long long)total, wall,
              100 * last_eval.acc);
  else
    log_.info("completed %lld steps in %.1f s (no test set given)", (long long)total, wall);
  Json j;
  j.add("event", "end").add("status", "completed").add("steps", total)
      .add("final_test_acc", have_eval ? last_eval.acc : NAN).add("wall_s", wall);
  log_.event(j);
  return kExitOk;
}

}  // namespace

int run_training(const Config& cfg) {
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
