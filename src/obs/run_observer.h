// The training run's observability in one place, so the trainer only calls it at fixed points: TensorBoard
// (every metrics event mirrored, optional weight/gradient histograms), the per-rank step-time breakdown with
// straggler detection at each log interval, and progress with ETAs. docs/observability.md describes the output.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/model/net.h"
#include "src/obs/progress.h"
#include "src/obs/step_timing.h"
#include "src/obs/tensorboard_log.h"
#include "src/train/config.h"
#include "src/train/runlog.h"

namespace cnn {

class RunObserver {
 public:
  // Collective (gathers the ranks' host names).
  RunObserver(const Config& cfg, Backend& be, Net& net, RunLog& log);
  const std::vector<std::string>& hosts() const { return hosts_; }
  StepTiming& timing() { return timing_; }

  // Once the start step is known (after --resume): opens the TensorBoard file on rank 0 and starts the clocks.
  // start: optimizer steps already done; total: the run's last step; spe: steps per epoch.
  void begin(const std::string& run_dir, int64_t start, int64_t total, int64_t spe);
  // After every step (`done` steps finished; `loss` the step's mean loss where known, else NaN).
  void after_step(int64_t done, double loss);
  // Fields every train event gets: elapsed time, ETAs, gradient norm of the last step, memory.
  // grad_norm: the norm when the step computed it (clipping), else negative (computed here).
  void add_train_fields(Json& j, int64_t done, double grad_norm);
  // " | elapsed 1:02, ETA epoch 0:41, run 12:10" for the log line.
  std::string eta_text(int64_t done) const;
  // Collective, at every log interval: gathers every rank's step-time breakdown and memory, names
  // stragglers (rank 0's log) and writes the ranks event.
  void log_ranks(int64_t done);
  // Weight and gradient histograms when --log.histograms_every divides `done` (rank 0 writes).
  void maybe_histograms(int64_t done);
  void finish();

 private:
  const Config& cfg_;
  Backend& be_;
  Net& net_;
  RunLog& log_;
  std::vector<std::string> hosts_;
  StepTiming timing_;
  std::unique_ptr<TensorBoardLog> tb_;
  std::unique_ptr<Progress> progress_;
  double steps_since_ = 0;  // steps since the last log_ranks
};

}  // namespace cnn
