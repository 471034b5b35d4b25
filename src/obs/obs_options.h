// What observability needs of the run's configuration: the [log] section of the Config (defined here, below
// src/train, which includes it) and the run's labels. src/train fills it (make_obs_options, src/train/recipe.h).
#pragma once
#include <cstdint>
#include <string>

namespace cnn {

// Observability (docs/observability.md).
struct LogSection {  // [log]
  int every_steps = 50;
  bool tensorboard = true;
  int64_t histograms_every = 0;  // 0: off
  double straggler_pct = 10;     // 0: off
  std::string progress = "auto";  // auto | bar | lines
  // Live monitoring: Prometheus endpoint on rank 0 (port 0: off), per-node textfile ("": off; %h: the host
  // name), NVML sampling period of the GPU figures (0: off).
  int prometheus_port = 0;
  std::string prometheus_addr = "0.0.0.0";
  std::string prometheus_file;
  double gpu_stats_s = 1;
};

struct ObsOptions : LogSection {
  std::string model, device, precision;  // --model, --device, --precision: the run's labels
  std::string version;                   // the program's version_string()
};

}  // namespace cnn
