// What observability needs of the run's configuration: the --log.* options and the run's labels. src/train
// fills it from the Config (make_obs_options, src/train/recipe.h), so that src/obs stays below src/train.
#pragma once
#include <cstdint>
#include <string>

namespace cnn {

struct ObsOptions {
  std::string model, device, precision;  // --model, --device, --precision: the run's labels
  std::string version;                   // the program's version_string()
  bool tensorboard = false;              // --log.tensorboard
  int64_t histograms_every = 0;          // --log.histograms_every (0: off)
  double straggler_pct = 0;              // --log.straggler_pct (0: off)
  std::string progress = "auto";         // --log.progress: auto | bar | lines
  int prometheus_port = 0;               // --log.prometheus_port (0: no endpoint)
  std::string prometheus_addr;           // --log.prometheus_addr
  std::string prometheus_file;           // --log.prometheus_file ("": none; %h: the host name)
  double gpu_stats_s = 0;                // --log.gpu_stats_s (0: no GPU figures)
};

}  // namespace cnn
