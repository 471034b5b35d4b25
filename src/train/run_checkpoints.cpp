#include "src/train/run_checkpoints.h"

#include <sys/stat.h>

#include <algorithm>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/watchdog.h"
#include "src/model/zoo.h"
#include "src/train/recipe.h"

namespace cnn {

namespace {

// The non-empty lines of `text`.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    if (b > a) v.push_back(text.substr(a, b - a));
  }
  return v;
}

}  // namespace

RunCheckpoints::RunCheckpoints(const Config& cfg, Backend& be, Net& net, Optimizer& opt, LossScaler& scaler,
                               RunLog& log, std::string dir, WeightEma* ema, SwaAverage* swa)
    : cfg_(cfg), be_(be), net_(net), opt_(opt), scaler_(scaler), log_(log), dir_(std::move(dir)), ema_(ema), swa_(swa) {
  host_params_.resize(net_.num_params());
  if (ema_) host_ema_.resize(net_.num_params() + ema_->num_buffers());
  if (swa_) {
    host_swa_params_.resize(net_.num_params());
    host_swa_buffers_.resize(net_.num_buffers());
  }
  host_buffers_.resize(net_.num_buffers());
  host_state_.resize(opt_.state_names().size(), std::vector<float>(net_.num_params()));
}

std::vector<CheckpointArray> RunCheckpoints::arrays() {
  std::vector<CheckpointArray> v;
  for (const ParamInfo& p : net_.param_table())
    v.push_back({"params/" + p.name, p.shape, host_params_.data() + p.offset});
  for (const ParamInfo& b : net_.buffer_table())
    v.push_back({"buffers/" + b.name, b.shape, host_buffers_.data() + b.offset});
  const auto& states = opt_.state_names();
  for (size_t k = 0; k < states.size(); ++k)
    for (const ParamInfo& p : net_.param_table())
      v.push_back({"optimizer/" + states[k] + "/" + p.name, p.shape, host_state_[k].data() + p.offset});
  if (ema_) {
    for (const ParamInfo& p : net_.param_table())
      v.push_back({"ema/" + p.name, p.shape, host_ema_.data() + p.offset});
    // The buffers' average follows the weights' (names never collide: buffers are "running_*").
    for (const ParamInfo& b : net_.buffer_table())
      v.push_back({"ema/" + b.name, b.shape, host_ema_.data() + net_.num_params() + b.offset});
  }
  if (swa_) {
    for (const ParamInfo& p : net_.param_table())
      v.push_back({"swa/params/" + p.name, p.shape, host_swa_params_.data() + p.offset});
    for (const ParamInfo& b : net_.buffer_table())
      v.push_back({"swa/buffers/" + b.name, b.shape, host_swa_buffers_.data() + b.offset});
  }
  return v;
}

void RunCheckpoints::download_state() {
  be_.download(host_params_.data(), net_.params(), sizeof(float) * net_.num_params());
  be_.download(host_buffers_.data(), net_.buffers(), sizeof(float) * net_.num_buffers());
  for (size_t k = 0; k < host_state_.size(); ++k) opt_.download_state(k, host_state_[k].data());
  if (ema_) be_.download(host_ema_.data(), ema_->data(), sizeof(float) * host_ema_.size());
  if (swa_) {
    be_.download(host_swa_params_.data(), swa_->params(), sizeof(float) * net_.num_params());
    be_.download(host_swa_buffers_.data(), swa_->buffers(), sizeof(float) * net_.num_buffers());
  }
}

void RunCheckpoints::upload_state() {
  be_.upload(net_.params(), host_params_.data(), sizeof(float) * net_.num_params());
  be_.upload(net_.buffers(), host_buffers_.data(), sizeof(float) * net_.num_buffers());
  if (ema_) be_.upload(ema_->data(), host_ema_.data(), sizeof(float) * host_ema_.size());
  if (swa_) {
    be_.upload(swa_->params(), host_swa_params_.data(), sizeof(float) * net_.num_params());
    be_.upload(swa_->buffers(), host_swa_buffers_.data(), sizeof(float) * net_.num_buffers());
  }
  net_.sync_weight_copy();
}

void RunCheckpoints::restore_optimizer_state() {
  if (resumed_from_.empty()) return;
  for (size_t k = 0; k < host_state_.size(); ++k) opt_.upload_state(k, host_state_[k].data());
}

void RunCheckpoints::save(const Cursor& next) {
  // Batch-norm running statistics differ per rank (local batches): save their mean, and keep using it, so a
  // resumed run continues from exactly the state the uninterrupted run has.
  average_buffers(be_, net_, comm_);
  if (ema_) average_across_ranks(be_, ema_->buffers(), ema_->num_buffers(), comm_, "averaged batch-norm statistics");
  download_state();
  CheckpointMeta m;
  m.step = next.step;
  m.epoch = next.epoch;
  m.step_in_epoch = next.step_in_epoch;
  m.global_batch = cfg_.train.batch;
  m.samples_seen = next.step * cfg_.train.batch;
  m.seed = cfg_.seed;
  m.world_size = world_size();
  m.precision = cfg_.precision;
  m.loss_scale = scaler_.scale();
  m.loss_scale_growth = scaler_.state().growth_tracker;
  m.skipped_steps = scaler_.state().skipped_steps;
  // Updates applied: AdamW counts them (a skipped step, fp16 overflow or --train.on_nonfinite skip, is not one).
  m.optimizer_steps = cfg_.train.optimizer == "adamw" ? opt_.steps() : next.step - m.skipped_steps;
  if (ema_) m.ema_updates = ema_->updates();
  if (swa_) {
    m.swa_models = swa_->models();
    m.swa_bn_models = swa_->bn_models();
  }
  m.model = cfg_.model;
  m.optimizer = cfg_.train.optimizer;
  m.config = config_to_ini(cfg_);
  m.version = version_string();
  const Dims& in = net_.input_dims();
  m.graph = {in.h, in.w, in.c, net_.num_classes(), graph_};
  m.info = info_;
  const std::string path = dir_ + "/" + checkpoint_name(next.step);
  CheckpointWriteStats st;
  try {
    CollectiveSection section("checkpoint write of " + path);  // MPI-IO inside HDF5: only the watchdog sees it
    st = write_checkpoint(path, arrays(), m);
  } catch (const Error& e) {
    Json j;
    j.add("event", "end").add("status", "failed").add("reason", "checkpoint").add("steps", next.step)
        .add("error", e.what());
    log_.event(j);
    throw;
  }
  last_step_ = next.step;
  std::vector<std::string> pruned;
  if (world_rank() == 0) pruned = prune_checkpoints(dir_, cfg_.checkpoint.keep, next.step);
  log_.info("checkpoint %s: %.1f MB in %.2f s (%.0f MB/s)%s", path.c_str(), st.bytes / 1e6, st.seconds,
            st.bytes / 1e6 / std::max(st.seconds, 1e-9),
            pruned.empty() ? "" : strprintf(", removed %zu old", pruned.size()).c_str());
  Json j;
  j.add("event", "checkpoint").add("step", next.step).add("path", path).add("bytes", static_cast<int64_t>(st.bytes))
      .add("seconds", st.seconds);
  log_.event(j);
}

void RunCheckpoints::restore_scaler(const CheckpointMeta& m, const std::string& path) {
  if (!scaler_.enabled()) return;
  if (m.precision != "fp16") {
    log_.info("checkpoint %s was written by a %s run: the fp16 loss scale starts afresh at %g", path.c_str(),
              m.precision.empty() ? "fp32" : m.precision.c_str(), scaler_.scale());
    return;
  }
  LossScalerState st;
  st.scale = static_cast<float>(m.loss_scale);
  st.growth_tracker = m.loss_scale_growth;
  st.skipped_steps = m.skipped_steps;
  scaler_.restore(st);
}

Cursor RunCheckpoints::resume() {
  Cursor c;
  if (cfg_.resume == "none") return c;
  const bool explicit_path = cfg_.resume != "auto";
  std::string listing;
  if (world_rank() == 0) {
    if (explicit_path) {
      listing = cfg_.resume;
    } else {
      for (const auto& p : list_checkpoints(dir_)) listing += p + "\n";
    }
  }
  broadcast(listing, 0);  // one rank's view of the directory decides, so all try the same files
  const std::vector<std::string> candidates = lines_of(listing);
  if (candidates.empty()) {
    log_.info("resume auto: no checkpoint in %s, starting from scratch", dir_.c_str());
    return c;
  }
  const auto views = arrays();
  for (const auto& path : candidates) {
    CheckpointMeta m;
    std::string err;
    bool layout_mismatch = false;
    const bool ok = [&] {
      CollectiveSection section("checkpoint read of " + path);
      return read_checkpoint(path, views, m, err, &layout_mismatch);
    }();
    if (ok && m.global_batch != cfg_.train.batch && !cfg_.eval_only) {
      // Same verdict everywhere; a different batch changes the global batch sequence, so no exact continuation.
      agree_or_exit(kExitCheckpoint, strprintf("checkpoint '%s' was written with global batch %lld; resume with "
                    "--train.batch %lld (the rank count may differ)", path.c_str(), (long long)m.global_batch,
                    (long long)m.global_batch));
    }
    if (ok) {
      upload_state();
      // One update per step the loss scaler did not skip: AdamW's bias correction continues exactly.
      opt_.set_steps(m.optimizer_steps >= 0 ? m.optimizer_steps : m.step);
      if (ema_) ema_->set_updates(m.ema_updates);
      if (swa_) swa_->set_counts(m.swa_models, m.swa_bn_models);
      restore_scaler(m, path);
      c.step = m.step;
      c.epoch = m.epoch;
      c.step_in_epoch = m.step_in_epoch;
      last_step_ = m.step;
      resumed_from_ = path;
      if (m.seed != cfg_.seed)
        log_.warn("checkpoint %s was written with seed %llu, this run uses %llu: the data order changes",
                  path.c_str(), (unsigned long long)m.seed, (unsigned long long)cfg_.seed);
      log_.info("resumed from %s: step %lld, epoch %lld, written by %d rank%s (now %d)", path.c_str(),
                (long long)m.step, (long long)m.epoch + 1, m.world_size, m.world_size == 1 ? "" : "s", world_size());
      return c;
    }
    // Another model's or optimizer's checkpoint is no damaged file to skip: continuing from an older one, or
    // from scratch, would mix two runs in one directory. Two files' graphs are compared at setup (setup.cpp).
    const std::string other = !m.model.empty() && m.model != cfg_.model &&
                                      !(is_onnx_model(m.model) && is_onnx_model(cfg_.model))
                                  ? strprintf("checkpoint '%s' belongs to model %s, this run builds model %s",
                                              path.c_str(), m.model.c_str(), cfg_.model.c_str())
                                  : "";
    if (explicit_path)
      agree_or_exit(kExitCheckpoint, err + (other.empty() ? "" : " (" + other + ")") +
                    "; fix --resume or use --resume auto/none");
    if (!other.empty())
      agree_or_exit(kExitCheckpoint, strprintf("--resume auto: %s: continue it with --model %s, or start this run in a "
                    "new --run-dir", other.c_str(), m.model.c_str()));
    if (layout_mismatch)
      agree_or_exit(kExitCheckpoint, err + "; continue with the options that wrote it (--model, --train.optimizer, "
                    "--train.ema and --train.swa_start_epoch on or off), or start this run in a new --run-dir");
    log_.warn("skipping checkpoint: %s; trying an older one", err.c_str());
  }
  // A graph built from a checkpoint (the model file gone) has no initial weights to start from.
  struct stat st;
  if (is_onnx_model(cfg_.model) && ::stat(cfg_.model.c_str(), &st) != 0)
    agree_or_exit(kExitCheckpoint, strprintf("no checkpoint in %s verifies, and model file %s, whose initial weights "
                  "a start from scratch needs, is gone: restore the file, or a checkpoint", dir_.c_str(),
                  cfg_.model.c_str()));
  log_.warn("no checkpoint in %s verifies; starting from scratch", dir_.c_str());
  return c;
}

}  // namespace cnn
