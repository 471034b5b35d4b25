// Configuration: every option can be set in an INI file (--config; sections map to dotted names, e.g.
// [train] batch=128 is --train.batch) and overridden on the command line. Parsing validates every value and
// reports problems as Error(kExitUsage) naming the option (and the file).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct Config {
  std::string config_file;
  std::string program = "cnntrain";  // argv[0], for the commands messages suggest
  std::string model = "fmnist_cnn";
  std::string device = "cpu";
  int threads = 1;
  uint64_t seed = 42;
  std::string run_dir;

  std::string data_train, data_test, data_format = "auto";
  int data_prefetch = 4;
  std::string data_on_bad_sample = "fail";
  std::string data_image_size;  // "HxW" or empty: as stored
  int data_read_threads = 1;
  int data_cache_mb = 256;
  std::string data_stage_dir;  // empty: read the datasets where they are
  std::string data_synthetic;  // "NxHxWxC:classes": generated images instead of data.train (benchmarks)

  // CUDA backend (docs/gpu.md).
  std::string conv_impl = "auto";  // auto | cudnn | custom
  int cudnn_workspace_mb = 512;
  std::string cudnn_algo = "heuristic";  // heuristic | search
  bool deterministic = false;
  bool gpu_tf32 = true;

  int64_t batch = 128;  // global
  int epochs = 10;
  int64_t max_steps = 0;  // 0: no limit; the length of training, and so the schedule's horizon
  int64_t stop_at_step = 0;  // 0: off; stop (with a checkpoint) after this step, the schedule unchanged
  double lr = 0.1, min_lr = 0.0, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0.0;
  double warmup_epochs = 0.0;
  bool nesterov = false;
  std::string optimizer = "sgd";
  std::string schedule = "cosine";
  // Training-recipe options (docs/options.md).
  std::string milestones;  // multistep: epochs, comma separated, e.g. "80,120"
  double gamma = 0.1;      // step/multistep decay factor
  double step_epochs = 30;  // step: decay every this many epochs
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;
  bool decay_bn_bias = false;  // weight decay also on biases and batch-norm scales/shifts
  int accum_steps = 1;         // micro-batches per optimizer step
  double clip_norm = 0.0;      // 0: no clipping
  int bn_group = 0;
  double bn_momentum = 0.1, bn_eps = 1e-5;
  bool bn_sync = false;  // batch-norm statistics over the global batch (all ranks)
  // Data-parallel communication (docs/gpu_clusters.md).
  double comm_bucket_mb = 25;
  bool comm_overlap = true;
  std::string comm_grad_dtype = "fp32";  // the type gradients are summed in across ranks
  double comm_timeout_s = 600;
  std::string comm_backend = "auto";  // auto | nccl | mpi
  bool gpu_share = false;
  int augment_crop_pad = 0;  // random crop of the original size from the image zero-padded by this much
  bool augment_flip = false;
  double augment_erase_p = 0.0;

  int64_t ckpt_every_steps = 0;  // 0: off
  double ckpt_every_seconds = 0;  // 0: off
  int ckpt_keep = 3;
  bool ckpt_at_end = true;
  std::string resume = "none";  // none | auto | PATH

  // Mixed precision (docs/mixed_precision.md): activation storage type, and fp16's dynamic loss scaling.
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  double amp_init_scale = 65536;
  int64_t amp_growth_interval = 2000;

  int eval_batch = 256;  // per rank
  int eval_every_epochs = 1;
  int log_every_steps = 50;
  // Observability (docs/observability.md).
  std::string on_nonfinite = "stop";  // stop | skip
  bool log_tensorboard = true;
  int64_t log_histograms_every = 0;  // 0: off
  double log_straggler_pct = 10;     // 0: off
  std::string log_progress = "auto";  // auto | bar | lines
  // Live monitoring (docs/observability.md): Prometheus endpoint on rank 0 (port 0: off), per-node textfile
  // ("": off; %h: the host name), NVML sampling period of the GPU figures (0: off).
  int log_prometheus_port = 0;
  std::string log_prometheus_addr = "0.0.0.0";
  std::string log_prometheus_file;
  double log_gpu_stats_s = 1;
};

// kGpuInfo: run the GPU preflight (src/train/gpu_info.h) instead of training.
enum class ParseAction { kRun, kExitHelp, kExitVersion, kExitPrintConfig, kGpuInfo };

struct ParseResult {
  ParseAction action = ParseAction::kRun;
  std::string text;  // what to print for help/version/print-config
};

// Parses argv (and the --config file). Throws Error(kExitUsage) on any problem.
ParseResult parse_config(int argc, char** argv, Config& cfg);
// "80,120" -> {80, 120}; throws Error(kExitUsage) naming --train.milestones unless positive and increasing.
std::vector<double> parse_milestones(const std::string& s);
// The resolved configuration as an INI file that parse_config reads back to the same Config. The options of
// one invocation (run-dir, resume, train.stop_at_step) are comments unless `with_invocation` (--print-config):
// config.ini and the checkpoints describe the run, and `--config RUN_DIR/config.ini` repeats it elsewhere.
std::string config_to_ini(const Config& cfg, bool with_invocation = false);
std::string version_string();

}  // namespace cnn
