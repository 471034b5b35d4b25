// The training run's observability in one place, so the trainer only calls it at fixed points: TensorBoard
// (every metrics event mirrored, optional weight/gradient histograms), the per-rank step-time breakdown with
// straggler detection at each log interval, progress with ETAs, each rank's GPU figures (NVML) and the live
// Prometheus figures (endpoint, per-node file). docs/observability.md describes the output.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "src/comm/device_binding.h"
#include "src/model/net.h"
#include "src/obs/nvml.h"
#include "src/obs/obs_options.h"
#include "src/obs/progress.h"
#include "src/obs/prometheus_exporter.h"
#include "src/obs/runlog.h"
#include "src/obs/step_timing.h"
#include "src/obs/tensorboard_log.h"

namespace cnn {

class RunObserver {
 public:
  // Collective (gathers the ranks' host names). binding: this rank's device (NVML finds a GPU by its PCI bus id).
  RunObserver(const ObsOptions& opt, Backend& be, Net& net, RunLog& log, const BindingRow& binding);
  ~RunObserver();
  const std::vector<std::string>& hosts() const { return hosts_; }
  StepTiming& timing() { return timing_; }

  // Once the start step is known (after --resume): opens the TensorBoard file on rank 0, starts the GPU sampler
  // and the Prometheus exporter, and starts the clocks. Collective.
  // start: optimizer steps already done; total: the run's last step; spe: steps per epoch.
  void begin(const std::string& run_dir, int64_t start, int64_t total, int64_t spe);
  // After every step (`done` steps finished; `loss` the step's mean loss where known, else NaN).
  void after_step(int64_t done, double loss);
  // Fields every train event gets: elapsed time, ETAs, gradient norm of the last step, memory, this rank's GPU
  // figures averaged over the interval (which closes the interval's GPU window: log_ranks reports the same).
  // grad_norm: the norm when the step computed it (clipping), else negative (computed here).
  void add_train_fields(Json& j, int64_t done, double grad_norm);
  // " | elapsed 1:02, ETA epoch 0:41, run 12:10" for the log line.
  std::string eta_text(int64_t done) const;
  // Collective, at every log interval: gathers every rank's step-time breakdown, memory and GPU figures, names
  // stragglers (rank 0's log), writes the ranks event and updates the Prometheus figures.
  void log_ranks(int64_t done);
  // Weight and gradient histograms when --log.histograms_every divides `done` (rank 0 writes).
  void maybe_histograms(int64_t done);
  void finish();

 private:
  // Opens NVML for this rank's GPU (or, under the test-only CNNTRAIN_TEST_NVML, a device of the fake library
  // for a rank without one) and logs one line about the GPU figures. Collective.
  void start_gpu_sampler();

  const ObsOptions opt_;
  Backend& be_;
  Net& net_;
  RunLog& log_;
  std::vector<std::string> hosts_;
  StepTiming timing_;
  std::unique_ptr<TensorBoardLog> tb_;
  std::unique_ptr<Progress> progress_;
  std::string pci_bus_id_;  // of this rank's GPU; --device cuda only
  std::unique_ptr<GpuSampler> gpu_;
  GpuFigures gpu_window_;   // this rank's GPU over the last closed interval
  std::unique_ptr<PrometheusExporter> prom_;
  double steps_since_ = 0;  // steps since the last log_ranks
};

}  // namespace cnn
