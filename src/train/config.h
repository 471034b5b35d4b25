// Configuration: every option can be set in an INI file (--config; sections map to dotted names, e.g.
// [train] batch=128 is --train.batch) and overridden on the command line. Parsing validates every value and
// reports problems as Error(kExitUsage) naming the option (and the file).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/obs/obs_options.h"

namespace cnn {

// One struct per INI section, its members named as the options are: --train.batch is cfg.train.batch.
struct DataSection {  // [data] (docs/data.md)
  std::string train, test, format = "auto";
  int prefetch = 4;
  std::string on_bad_sample = "fail";
  std::string image_size;  // "HxW" or empty: as stored
  int test_resize = 0;     // evaluation with image_size: shorter side before the center crop; 0: size / 0.875
  int read_threads = 1;
  int cache_mb = 256;
  std::string stage_dir;  // empty: read the datasets where they are
  std::string synthetic;  // "NxHxWxC:classes": generated images instead of data.train (benchmarks)
};

// The CUDA backend (docs/gpu.md).
struct ConvSection {  // [conv]
  std::string impl = "auto";  // auto | cudnn | custom
};
struct CudnnSection {  // [cudnn]
  int workspace_mb = -1;           // -1: auto (1/16 of the GPU's memory, at least 512)
  std::string algo = "heuristic";  // heuristic | search
  bool batchnorm = false;          // cuDNN for batch norms without a fused ReLU or residual join
};
struct GpuSection {  // [gpu]
  bool tf32 = true;
  bool share = false;
};

struct TrainSection {  // [train] (docs/options.md)
  int64_t batch = 128;  // global
  int epochs = 10;
  int64_t max_steps = 0;  // 0: no limit; the length of training, and so the schedule's horizon
  int64_t stop_at_step = 0;  // 0: off; stop (with a checkpoint) after this step, the schedule unchanged
  double lr = 0.1, min_lr = 0.0, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0.0;
  double warmup_epochs = 0.0;
  bool nesterov = false;
  std::string optimizer = "sgd";
  std::string schedule = "cosine";
  std::string milestones;  // multistep: epochs, comma separated, e.g. "80,120"
  double gamma = 0.1;      // step/multistep decay factor
  double step_epochs = 30;  // step: decay every this many epochs
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;
  bool decay_bn_bias = false;  // weight decay also on biases and batch-norm scales/shifts
  int accum_steps = 1;         // micro-batches per optimizer step
  double clip_norm = 0.0;      // 0: no clipping
  std::string on_nonfinite = "stop";  // stop | skip
  double ema = 0.0;            // decay of the weights' moving average; 0: off
  bool ema_warmup = false;     // decay min(ema, (1+t)/(10+t)) at update t
  // Stochastic weight averaging (src/train/swa.h): after swa_start_epoch epochs (0: off), SWALR's rate towards
  // swa_lr over swa_anneal_epochs (cos | linear), the weights averaged at every epoch end.
  int swa_start_epoch = 0;
  double swa_lr = 0.0;
  int swa_anneal_epochs = 10;
  std::string swa_anneal = "cos";
  std::string recompute = "false";  // activation recomputation: true, false or block names (Net::set_recompute)
  // Fine-tuning (src/train/freeze.h): frozen parameters (name prefixes or re:REGEX), whether batch norm in the
  // frozen part keeps its running statistics, the epoch freezing ends (0: never), per-parameter lr factors.
  std::string freeze, lr_mult;
  bool freeze_bn = true;
  int unfreeze_at_epoch = 0;
};

// [init]: weights from a file (src/train/init_from.h).
struct InitSection {
  std::string from, skip;
  bool strict = false;
};

struct CheckpointSection {  // [checkpoint] (docs/checkpoints.md)
  int64_t every_steps = 0;  // 0: off
  double every_seconds = 0;  // 0: off
  int keep = 3;
  bool at_end = true;
};

struct BnSection {  // [bn]
  double momentum = 0.1, eps = 1e-5;
  bool sync = false;  // statistics over the global batch (all ranks)
  int group_size = 0;
};

// Data-parallel communication (docs/gpu_clusters.md).
struct CommSection {  // [comm]
  double bucket_mb = 25;
  bool overlap = true;
  std::string grad_dtype = "fp32";  // the type gradients are summed in across ranks
  double timeout_s = 600;
  std::string backend = "auto";  // auto | nccl | mpi
};

struct AugmentSection {  // [augment]
  int crop_pad = 0;  // random crop of the original size from the image zero-padded by this much
  bool flip = false;
  double rotate = 0.0;                    // degrees: random rotation in [-rotate, rotate]
  std::string color_jitter = "0,0,0";     // brightness,contrast,saturation strengths (parse_color_jitter)
  double erase_p = 0.0;
  std::string rrc_scale = "0.08,1", rrc_ratio = "3/4,4/3";  // random-resized crop ranges (parse_range)
  double mixup = 0.0, cutmix = 0.0;           // Beta alphas (io/mix.h); 0: off
  double mix_prob = 1.0, switch_prob = 0.5;   // mix a sample at all; cutmix rather than mixup when both are on
};

struct EvalSection {  // [eval]
  int batch = 256;  // per rank
  int every_epochs = 1;
};

// Mixed precision (docs/mixed_precision.md): fp16's dynamic loss scaling.
struct AmpSection {  // [amp]
  double init_scale = 65536;
  int64_t growth_interval = 2000;
};

struct Config {
  std::string config_file;
  std::string program = "cnntrain";  // argv[0], for the commands messages suggest
  // The options without a section.
  std::string model = "fmnist_cnn";  // a zoo name or FILE.onnx (is_onnx_model)
  double model_stochastic_depth = 0.2;  // --model.stochastic_depth: efficientnet_b0's (ModelOptions)
  bool init_random = false;          // FILE.onnx: fresh initial weights instead of the file's initializers
  InitSection init;
  std::string device = "cpu";
  int threads = 1;
  uint64_t seed = 42;
  std::string run_dir;
  std::string resume = "none";  // none | auto | PATH
  bool eval_only = false;       // --eval-only: evaluate the resumed weights on --data.test, no training
  bool deterministic = false;
  std::string precision = "fp32";  // activation storage: fp32 | bf16 | fp16

  DataSection data;
  ConvSection conv;
  CudnnSection cudnn;
  GpuSection gpu;
  TrainSection train;
  CheckpointSection checkpoint;
  BnSection bn;
  CommSection comm;
  AugmentSection augment;
  EvalSection eval;
  LogSection log;
  AmpSection amp;
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
// "0.4,0.4,0.2" -> {0.4, 0.4, 0.2}; throws Error(kExitUsage) naming --augment.color_jitter unless three numbers
// >= 0.
std::array<double, 3> parse_color_jitter(const std::string& s);
// "MIN,MAX", each a number or a fraction "P/Q", 0 < MIN <= MAX (and MAX <= 1 for augment.rrc_scale); throws
// Error(kExitUsage) naming option `name`.
std::array<double, 2> parse_range(const std::string& name, const std::string& s);
// The resolved configuration as an INI file that parse_config reads back to the same Config. The options of
// one invocation (run-dir, resume, train.stop_at_step) are comments unless `with_invocation` (--print-config):
// config.ini and the checkpoints describe the run, and `--config RUN_DIR/config.ini` repeats it elsewhere.
std::string config_to_ini(const Config& cfg, bool with_invocation = false);
std::string version_string();

}  // namespace cnn
