// The option tables of config.ini's sections ([data], [train], ...): names, ranges, help and where each value
// lives in a Config (docs/options.md lists them all).
#include <arpa/inet.h>

#include <string>
#include <vector>

#include "io/synthetic_dataset.h"
#include "src/base/error.h"
#include "src/train/config_opt.h"

namespace cnn::config_detail {

// [init]: where the initial weights come from; with fine-tuning's [train] options beside them (one block:
// src/train/init_from.h, src/train/freeze.h).
std::vector<Opt> init_options() {
  const auto in = [](auto member) { return field(&Config::init, member); };
  return {bool_opt("init.random", field(&Config::init_random),
                   "--model FILE.onnx: draw fresh initial weights (He-normal) instead of the file's initializers"),
          str_opt("init.from", in(&InitSection::from), {},
                  "initial weights from a cnntrain checkpoint, an HDF5 weights export, an ONNX file or a safetensors "
                  "file (torchvision/timm names), matched by name; weights only (docs/models.md \"Fine-tuning\")"),
          bool_opt("init.strict", in(&InitSection::strict),
                   "init.from: exit 2 when any parameter or statistic is not in the file or has another shape"),
          str_opt("init.skip", in(&InitSection::skip), {},
                  "init.from: freshly initialise these anyway: comma-separated name prefixes or re:REGEX"),
          str_opt("train.freeze", field(&Config::train, &TrainSection::freeze), {},
                  "parameters not trained: comma-separated name prefixes or re:REGEX (e.g. conv1,bn1,layer1)"),
          bool_opt("train.freeze_bn", field(&Config::train, &TrainSection::freeze_bn),
                   "batch norm in the frozen part runs on its running statistics and leaves them as they are"),
          int_opt("train.unfreeze_at_epoch", field(&Config::train, &TrainSection::unfreeze_at_epoch), 0, 1 << 20,
                  "train.freeze ends at the start of this epoch (counted from 0; 0: never)"),
          str_opt("train.lr_mult", field(&Config::train, &TrainSection::lr_mult), {},
                  "per-parameter learning-rate factors PATTERN=X,... (PATTERN a prefix or re:REGEX; the first "
                  "match wins), e.g. layer1=0.1,layer2=0.1")};
}

// [data]: the datasets and how they are read (docs/data.md).
std::vector<Opt> data_options() {
  const auto in = [](auto member) { return field(&Config::data, member); };
  return {
      str_opt("data.train", in(&DataSection::train), {}, "training set file (HDF5 or LMDB; docs/data.md)"),
      str_opt("data.test", in(&DataSection::test), {}, "test set file, evaluated after every epoch"),
      str_opt("data.format", in(&DataSection::format), {"auto", "hdf5", "lmdb"}, "dataset format"),
      str_opt("data.on_bad_sample", in(&DataSection::on_bad_sample), {"fail", "skip"},
              "LMDB: a record that is not a valid Datum/image fails the run or is skipped (counted)"),
      {"data.image_size", "network input HxW: images of another size are resized (training: random-resized crop "
       "+ flip; test: resize + center crop; docs/data.md); empty or the stored size reads images as stored",
       [](Config& c, const std::string& x) {
         int h = 0, w = 0;
         char tail = 0;
         if (!x.empty() && (std::sscanf(x.c_str(), "%dx%d%c", &h, &w, &tail) != 2 || h < 1 || w < 1 ||
                            h > 65536 || w > 65536))
           bad("data.image_size", x, "expected HxW, e.g. 224x224, or empty");
         c.data.image_size = x;
       },
       [](const Config& c) { return c.data.image_size; }},
      int_opt("data.test_resize", in(&DataSection::test_resize), 0, 65536,
              "with data.image_size: test images' shorter side before the center crop (0: round(max(H,W)/0.875), "
              "torchvision's 256 for 224)"),
      int_opt("data.read_threads", in(&DataSection::read_threads), 1, 256,
              "threads decoding (LMDB) or resizing (HDF5, data.image_size) images within one batch read"),
      int_opt("data.prefetch", in(&DataSection::prefetch), 1, 64, "batches the loader prepares ahead"),
      int_opt("data.cache_mb", in(&DataSection::cache_mb), 0, 1 << 20, "HDF5 chunk cache per rank (MiB)"),
      // A path on this cluster's nodes, not part of what the run is.
      invocation(str_opt("data.stage_dir", in(&DataSection::stage_dir), {},
                         "node-local directory: one rank per node copies the datasets there before training and "
                         "all ranks read the copies (docs/data.md)")),
      {"data.synthetic", "NxHxWxC:CLASSES, e.g. 12800x224x224x3:1000: train on N generated images "
       "(throughput measurements without a dataset; replaces data.train, no test set)",
       [](Config& c, const std::string& x) {
         if (!x.empty()) parse_synthetic_spec(x);
         c.data.synthetic = x;
       },
       [](const Config& c) { return c.data.synthetic; }},
  };
}

// [conv], [cudnn], [gpu]: the CUDA backend (docs/gpu.md).
std::vector<Opt> conv_options() {
  const auto in = [](auto member) { return field(&Config::conv, member); };
  return {
      str_opt("conv.impl", in(&ConvSection::impl), {"auto", "cudnn", "custom"},
              "CUDA convolutions, batch norm and linear layers: auto (cuDNN/cuBLASLt on a GPU, custom "
              "kernels under emu), cudnn, or custom (the project's kernels)"),
  };
}

std::vector<Opt> cudnn_options() {
  const auto in = [](auto member) { return field(&Config::cudnn, member); };
  return {
      int_opt("cudnn.workspace_mb", in(&CudnnSection::workspace_mb), -1, 1 << 20,
              "cap of one cuDNN/cuBLASLt workspace from the device arena (MiB); -1: 1/16 of the GPU's memory, at "
              "least 512"),
      str_opt("cudnn.algo", in(&CudnnSection::algo), {"heuristic", "search"},
              "cuDNN algorithm choice per shape: heuristic, or search (timed, on the first step)"),
      bool_opt("cudnn.batchnorm", in(&CudnnSection::batchnorm),
               "cuDNN for the batch norms without a fused ReLU or residual join (ResNet projection shortcuts); "
               "off: the custom kernels, 10x faster there on an H100"),
  };
}

std::vector<Opt> gpu_options() {
  const auto in = [](auto member) { return field(&Config::gpu, member); };
  return {
      bool_opt("gpu.tf32", in(&GpuSection::tf32),
               "CUDA: TF32 tensor cores for fp32 convolutions and matmuls on Ampere and newer"),
      bool_opt("gpu.share", in(&GpuSection::share),
               "allow more ranks than visible GPUs on a node (ranks share GPUs round-robin and sum through "
               "MPI on host copies: NCCL needs one GPU per rank)"),
  };
}

// [train]: the optimizer, its schedule and the steps.
std::vector<Opt> train_options() {
  const auto in = [](auto member) { return field(&Config::train, member); };
  return {
      int_opt("train.batch", in(&TrainSection::batch), 1, 1LL << 30,
              "global batch size (split evenly across ranks; must be divisible by their number)"),
      int_opt("train.epochs", in(&TrainSection::epochs), 1, 1 << 24, "epochs to train"),
      int_opt("train.max_steps", in(&TrainSection::max_steps), 0, 1LL << 40,
              "length of training in optimizer steps, if shorter than train.epochs (0: no limit); the "
              "learning-rate schedule ends there"),
      invocation(int_opt("train.stop_at_step", in(&TrainSection::stop_at_step), 0, 1LL << 40,
                         "stop after this step with a checkpoint, the schedule unchanged; --resume auto continues "
                         "exactly (0: off)")),
      real_opt("train.lr", in(&TrainSection::lr), 0, 1e6, true, "peak learning rate"),
      real_opt("train.min_lr", in(&TrainSection::min_lr), 0, 1e6, false, "learning rate at the end of cosine decay"),
      str_opt("train.optimizer", in(&TrainSection::optimizer), {"sgd", "adamw"},
              "sgd (momentum, nesterov) or adamw (decoupled weight decay)"),
      real_opt("train.momentum", in(&TrainSection::momentum), 0, 0.999999, false, "SGD momentum"),
      bool_opt("train.nesterov", in(&TrainSection::nesterov), "Nesterov momentum"),
      real_opt("train.weight_decay", in(&TrainSection::weight_decay), 0, 1, false,
               "weight decay: L2 for sgd, decoupled for adamw (weights only unless train.decay_bn_bias)"),
      real_opt("train.label_smoothing", in(&TrainSection::label_smoothing), 0, 0.999, false, "label smoothing"),
      str_opt("train.schedule", in(&TrainSection::schedule), {"cosine", "constant", "step", "multistep"},
              "learning-rate schedule after warmup"),
      real_opt("train.warmup_epochs", in(&TrainSection::warmup_epochs), 0, 1e6, false,
               "linear warmup from 0 to train.lr over this many epochs"),
      {"train.milestones", "multistep: epochs at which the lr is multiplied by train.gamma, e.g. 80,120",
       [](Config& c, const std::string& x) {
         parse_milestones(x);
         c.train.milestones = x;
       },
       [](const Config& c) { return c.train.milestones; }},
      real_opt("train.gamma", in(&TrainSection::gamma), 0, 1, true, "step/multistep: lr decay factor"),
      real_opt("train.step_epochs", in(&TrainSection::step_epochs), 0, 1e6, true,
               "step: multiply the lr by train.gamma every this many epochs"),
      real_opt("train.beta1", in(&TrainSection::beta1), 0, 0.999999, false, "adamw: first-moment decay"),
      real_opt("train.beta2", in(&TrainSection::beta2), 0, 0.999999999, false, "adamw: second-moment decay"),
      real_opt("train.adam_eps", in(&TrainSection::adam_eps), 0, 1, true, "adamw: denominator epsilon"),
      bool_opt("train.decay_bn_bias", in(&TrainSection::decay_bn_bias),
               "apply weight decay to biases and batch-norm scales/shifts too"),
      int_opt("train.accum_steps", in(&TrainSection::accum_steps), 1, 1 << 20,
              "gradient accumulation: micro-batches of batch/(ranks*accum_steps) per optimizer step"),
      real_opt("train.clip_norm", in(&TrainSection::clip_norm), 0, 1e12, false,
               "clip the gradient's global L2 norm to this (0: off)"),
      str_opt("train.on_nonfinite", in(&TrainSection::on_nonfinite), {"stop", "skip"},
              "a NaN/inf gradient stops the run (exit 5) or skips that step's update on every rank"),
      real_opt("train.ema", in(&TrainSection::ema), 0, 0.999999999, false,
               "exponential moving average of the weights with this decay, evaluated beside them (ema_test_acc) "
               "and kept in checkpoints, e.g. 0.999 (0: off)"),
      bool_opt("train.ema_warmup", in(&TrainSection::ema_warmup),
               "train.ema: decay min(train.ema, (1+t)/(10+t)) at update t, as timm"),
      int_opt("train.swa_start_epoch", in(&TrainSection::swa_start_epoch), 0, 1 << 24,
              "stochastic weight averaging after this many epochs: the weights at every later epoch end averaged, "
              "batch-norm statistics recomputed for them at the end and evaluated (swa_test_acc) (0: off)"),
      real_opt("train.swa_lr", in(&TrainSection::swa_lr), 0, 1e6, false,
               "train.swa_start_epoch: the learning rate SWALR anneals to from the scheduled one"),
      int_opt("train.swa_anneal_epochs", in(&TrainSection::swa_anneal_epochs), 0, 1 << 24,
              "train.swa_start_epoch: epochs of annealing to train.swa_lr"),
      str_opt("train.swa_anneal", in(&TrainSection::swa_anneal), {"cos", "linear"},
              "train.swa_start_epoch: the annealing's shape, as SWALR's anneal_strategy"),
      str_opt("train.recompute", in(&TrainSection::recompute), {},
              "activation recomputation: true (every residual block), false, or block names/prefixes such as "
              "layer3,layer4.2: they keep only input and output and rerun the rest in backward (bit-identical)"),
  };
}

// [checkpoint] (docs/checkpoints.md).
std::vector<Opt> checkpoint_options() {
  const auto in = [](auto member) { return field(&Config::checkpoint, member); };
  return {
      int_opt("checkpoint.every_steps", in(&CheckpointSection::every_steps), 0, 1LL << 40,
              "write a checkpoint every N steps (0: off)"),
      real_opt("checkpoint.every_seconds", in(&CheckpointSection::every_seconds), 0, 1e9, false,
               "write a checkpoint when this many seconds passed since the last one (0: off)"),
      int_opt("checkpoint.keep", in(&CheckpointSection::keep), 1, 1 << 20, "committed checkpoints to keep"),
      bool_opt("checkpoint.at_end", in(&CheckpointSection::at_end), "write a checkpoint when training ends"),
  };
}

// [bn]: batch normalisation.
std::vector<Opt> bn_options() {
  const auto in = [](auto member) { return field(&Config::bn, member); };
  return {
      real_opt("bn.momentum", in(&BnSection::momentum), 0, 1, false,
               "batch norm: running = (1-momentum) running + momentum batch"),
      real_opt("bn.eps", in(&BnSection::eps), 0, 1, true, "batch norm: variance epsilon"),
      bool_opt("bn.sync", in(&BnSection::sync),
               "synchronised batch norm: statistics over the global batch, summed across ranks in forward "
               "and backward (N ranks then compute what one rank computes with the whole batch)"),
      int_opt("bn.group_size", in(&BnSection::group_size), 0, 1 << 20,
              "batch norm: training statistics over groups of this many samples (0: the rank's whole "
              "micro-batch); a fixed group makes results independent of the rank count"),
  };
}

// [comm]: the sums across ranks (docs/gpu_clusters.md).
std::vector<Opt> comm_options() {
  const auto in = [](auto member) { return field(&Config::comm, member); };
  return {
      real_opt("comm.bucket_mb", in(&CommSection::bucket_mb), 0, 1 << 20, true,
               "gradient allreduce bucket size (MiB); each bucket starts as soon as backward has made it"),
      bool_opt("comm.overlap", in(&CommSection::overlap),
               "start gradient buckets during backward (false: all after backward, for measuring)"),
      str_opt("comm.grad_dtype", in(&CommSection::grad_dtype), {"fp32", "bf16", "fp16"},
              "type the gradient is summed in across ranks: fp32, or bf16/fp16 (half the bytes; every "
              "addition rounds to 16 bits: docs/mixed_precision.md)"),
      real_opt("comm.timeout_s", in(&CommSection::timeout_s), 0, 1e7, true,
               "collective deadline: a rank that waits longer reports the ranks that did not arrive and "
               "aborts the job"),
      str_opt("comm.backend", in(&CommSection::backend), {"auto", "nccl", "mpi"},
              "gradient/batch-norm sums: auto (MPI for cpu, NCCL for cuda/emu unless GPUs are shared), "
              "nccl, or mpi (device runs: through host copies)"),
  };
}

// [augment], [eval].
std::vector<Opt> augment_options() {
  const auto in = [](auto member) { return field(&Config::augment, member); };
  return {
      int_opt("augment.crop_pad", in(&AugmentSection::crop_pad), 0, 1 << 12,
              "random crop from the image zero-padded by this many pixels (0: off)"),
      bool_opt("augment.flip", in(&AugmentSection::flip), "random horizontal flip"),
      real_opt("augment.rotate", in(&AugmentSection::rotate), 0, 180, false,
               "random rotation by up to this many degrees either way, bilinear, zero outside (0: off)"),
      {"augment.color_jitter",
       "B,C,S: random brightness, contrast, saturation factors in [max(0,1-x), 1+x], applied in this order "
       "(0,0,0: off)",
       [](Config& c, const std::string& x) {
         parse_color_jitter(x);
         c.augment.color_jitter = x;
       },
       [](const Config& c) { return c.augment.color_jitter; }},
      real_opt("augment.erase_p", in(&AugmentSection::erase_p), 0, 1, false,
               "random erasing probability (area 2-33%, aspect 0.3-3.3, erased to 0 after normalisation)"),
      range_opt("augment.rrc_scale", in(&AugmentSection::rrc_scale), "MIN,MAX: random-resized crop area fraction"),
      range_opt("augment.rrc_ratio", in(&AugmentSection::rrc_ratio), "MIN,MAX: random-resized crop aspect w/h"),
      real_opt("augment.mixup", in(&AugmentSection::mixup), 0, 1e3, false,
               "mixup: each sample blended with its pair partner, lam ~ Beta(ALPHA, ALPHA), soft-target loss "
               "(0: off; the per-rank batch must be even)"),
      real_opt("augment.cutmix", in(&AugmentSection::cutmix), 0, 1e3, false,
               "cutmix: a box of the pair partner pasted in, lam ~ Beta(ALPHA, ALPHA) corrected to the box "
               "area (0: off)"),
      real_opt("augment.mix_prob", in(&AugmentSection::mix_prob), 0, 1, false,
               "probability that a sample is mixed at all (mixup/cutmix)"),
      real_opt("augment.switch_prob", in(&AugmentSection::switch_prob), 0, 1, false,
               "with both mixup and cutmix: probability of cutmix for a sample"),
  };
}

std::vector<Opt> eval_options() {
  const auto in = [](auto member) { return field(&Config::eval, member); };
  return {
      int_opt("eval.batch", in(&EvalSection::batch), 1, 1 << 20, "samples per rank per evaluation step"),
      int_opt("eval.every_epochs", in(&EvalSection::every_epochs), 1, 1 << 24, "evaluate every N epochs"),
  };
}

// [log]: progress, TensorBoard and live monitoring (docs/observability.md).
std::vector<Opt> log_options() {
  const auto in = [](auto member) { return field(&Config::log, member); };
  return {
      int_opt("log.every_steps", in(&LogSection::every_steps), 1, 1 << 30, "progress line every N steps"),
      bool_opt("log.tensorboard", in(&LogSection::tensorboard),
               "write TensorBoard event files to RUN_DIR/tensorboard"),
      int_opt("log.histograms_every", in(&LogSection::histograms_every), 0, 1LL << 40,
              "TensorBoard histograms of weights and gradients every N steps (0: off)"),
      real_opt("log.straggler_pct", in(&LogSection::straggler_pct), 0, 1e6, false,
               "name a rank whose busy time per step is this many percent above the median (0: off)"),
      str_opt("log.progress", in(&LogSection::progress), {"auto", "bar", "lines"},
              "auto: an updating status line when stdout is a terminal; bar: always; lines: never"),
      int_opt("log.prometheus_port", in(&LogSection::prometheus_port), 0, 65535,
              "rank 0 serves Prometheus metrics at http://ADDR:PORT/metrics (0: off)"),
      {"log.prometheus_addr", "address the Prometheus endpoint listens on (numeric IPv4/IPv6; 0.0.0.0: all)",
       [](Config& c, const std::string& x) {
         unsigned char buf[sizeof(in6_addr)];
         if (inet_pton(AF_INET, x.c_str(), buf) != 1 && inet_pton(AF_INET6, x.c_str(), buf) != 1)
           bad("log.prometheus_addr", x, "expected a numeric IPv4 or IPv6 address, e.g. 127.0.0.1 or ::");
         c.log.prometheus_addr = x;
       },
       [](const Config& c) { return c.log.prometheus_addr; }},
      str_opt("log.prometheus_file", in(&LogSection::prometheus_file), {},
              "each node's first rank writes its node's Prometheus metrics to this file for "
              "node_exporter's textfile collector (%h: host name; empty: off)"),
      real_opt("log.gpu_stats_s", in(&LogSection::gpu_stats_s), 0, 86400, false,
               "sample each rank's GPU through NVML every this many seconds (0: off)"),
  };
}

// [amp]: fp16 loss scaling (docs/mixed_precision.md).
std::vector<Opt> amp_options() {
  const auto in = [](auto member) { return field(&Config::amp, member); };
  return {
      real_opt("amp.init_scale", in(&AmpSection::init_scale), 0, 3e38, true,
               "fp16: initial dynamic loss scale (halved on inf/NaN gradients, the step skipped)"),
      int_opt("amp.growth_interval", in(&AmpSection::growth_interval), 1, 1LL << 40,
              "fp16: double the loss scale after this many consecutive finite steps"),
  };
}

}  // namespace cnn::config_detail
