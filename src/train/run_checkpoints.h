// The run's side of checkpoints: what a checkpoint of this run holds (fp32 parameters, buffers, optimizer
// state, the weights' moving average with --train.ema and SWA average with --train.swa_start_epoch, position in
// the global batch sequence, the fp16 loss scaler), written through host copies, and
// `--resume` (auto, a path or none). The file format and its collective I/O are src/checkpoint/checkpoint.h.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/collectives.h"
#include "src/checkpoint/checkpoint.h"
#include "src/model/net.h"
#include "src/obs/runlog.h"
#include "src/train/config.h"
#include "src/train/loss_scaler.h"
#include "src/train/optimizer.h"
#include "src/train/swa.h"
#include "src/train/weight_ema.h"

namespace cnn {

// Position of the next global batch: optimizer steps done, and the epoch and step within it.
struct Cursor {
  int64_t step = 0, epoch = 0, step_in_epoch = 0;
};

class RunCheckpoints {
 public:
  RunCheckpoints(const Config& cfg, Backend& be, Net& net, Optimizer& opt, LossScaler& scaler, RunLog& log,
                 std::string dir, WeightEma* ema = nullptr, SwaAverage* swa = nullptr);
  // The ranks' collectives (null on one rank), made after resume(): save() averages the batch-norm buffers
  // through them.
  void set_collectives(Collectives* comm) { comm_ = comm; }
  // An imported model's graph, stored in every checkpoint so that it resumes and exports without the file
  // (Setup::graph; the input shape and class count are stored for every model).
  void set_graph(std::string onnx) { graph_ = std::move(onnx); }
  // Class names, mean/std and input size that save() records for prediction (src/checkpoint/model_info.h).
  void set_model_info(ModelInfo info) { info_ = std::move(info); }
  // Collective: writes checkpoints/ckpt-<step>.h5 for the state before `next`, logs it and prunes older ones
  // (--checkpoint.keep; never the one just written, never a newer one).
  void save(const Cursor& next);
  // Collective: applies --resume; returns where training continues (step 0 when starting from scratch).
  Cursor resume();
  // Step of the newest checkpoint written or resumed from in this process; -1 when none.
  int64_t last_step() const { return last_step_; }
  // The checkpoint resume() loaded (empty when it started from scratch).
  const std::string& resumed_from() const { return resumed_from_; }
  // Hands the resumed optimizer state to the optimizer; after resume() and after the optimizer holds the
  // trainable parameters of the resumed epoch (Optimizer::set_lr_mult), which resume() cannot know in advance.
  void restore_optimizer_state();

 private:
  // Named views of the host copies below, in the order the checkpoint stores them.
  std::vector<CheckpointArray> arrays();
  void download_state();
  void upload_state();
  // The fp16 loss scaler's state from a checkpoint written by an fp16 run (other checkpoints: a fresh scaler).
  void restore_scaler(const CheckpointMeta& m, const std::string& path);

  const Config& cfg_;
  Backend& be_;
  Net& net_;
  Optimizer& opt_;
  LossScaler& scaler_;
  RunLog& log_;
  Collectives* comm_ = nullptr;
  std::string dir_;
  WeightEma* ema_;
  SwaAverage* swa_;
  std::vector<float> host_params_, host_buffers_, host_ema_, host_swa_params_, host_swa_buffers_;
  std::vector<std::vector<float>> host_state_;
  int64_t last_step_ = -1;
  std::string resumed_from_;
  std::string graph_;
  ModelInfo info_;
};

}  // namespace cnn
