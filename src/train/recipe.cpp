#include "src/train/recipe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/base/error.h"

namespace cnn {

ModelOptions make_model_options(const Config& cfg) {
  ModelOptions mo;
  mo.bn.momentum = static_cast<float>(cfg.bn.momentum);
  mo.bn.eps = static_cast<float>(cfg.bn.eps);
  mo.bn.group = cfg.bn.group_size;
  mo.bn.sync = cfg.bn.sync;
  mo.stochastic_depth = static_cast<float>(cfg.model_stochastic_depth);
  return mo;
}

OptimizerConfig make_optimizer_config(const Config& cfg) {
  OptimizerConfig oc;
  oc.kind = cfg.train.optimizer;
  oc.momentum = cfg.train.momentum;
  oc.weight_decay = cfg.train.weight_decay;
  oc.nesterov = cfg.train.nesterov;
  oc.decay_bn_bias = cfg.train.decay_bn_bias;
  oc.beta1 = cfg.train.beta1;
  oc.beta2 = cfg.train.beta2;
  oc.eps = cfg.train.adam_eps;
  return oc;
}

LrSchedule make_lr_schedule(const Config& cfg, int64_t spe, int64_t total_steps) {
  LrSchedule s;
  s.kind = cfg.train.schedule;
  s.peak = cfg.train.lr;
  s.min_lr = cfg.train.min_lr;
  s.warmup_steps = static_cast<int64_t>(std::llround(cfg.train.warmup_epochs * spe));
  s.total_steps = total_steps;
  s.gamma = cfg.train.gamma;
  s.step_size = std::max<int64_t>(1, std::llround(cfg.train.step_epochs * spe));
  for (double m : parse_milestones(cfg.train.milestones)) s.milestones.push_back(std::llround(m * spe));
  if (cfg.train.swa_start_epoch > 0) {
    s.swa.start_step = cfg.train.swa_start_epoch * spe;
    s.swa.steps_per_epoch = spe;
    s.swa.swa_lr = cfg.train.swa_lr;
    s.swa.anneal_epochs = cfg.train.swa_anneal_epochs;
    s.swa.cosine = cfg.train.swa_anneal == "cos";
  }
  return s;
}

StepConfig make_step_config(const Config& cfg) {
  StepConfig sc;
  sc.global_batch = cfg.train.batch;
  sc.label_smoothing = static_cast<float>(cfg.train.label_smoothing);
  sc.accum_steps = cfg.train.accum_steps;
  sc.clip_norm = cfg.train.clip_norm;
  sc.seed = cfg.seed;
  return sc;
}

DType activation_dtype(const Config& cfg) {
  DType t = DType::kF32;
  CNN_CHECK(parse_dtype(cfg.precision, t), "precision '%s' passed the option check", cfg.precision.c_str());
  return t;
}

LossScalerConfig make_loss_scaler_config(const Config& cfg) {
  LossScalerConfig c;
  c.enabled = activation_dtype(cfg) == DType::kF16;
  c.init_scale = static_cast<float>(cfg.amp.init_scale);
  c.growth_interval = cfg.amp.growth_interval;
  return c;
}

AugmentConfig make_augment_config(const Config& cfg) {
  AugmentConfig a;
  a.crop_pad = cfg.augment.crop_pad;
  a.flip = cfg.augment.flip;
  a.rotate = static_cast<float>(cfg.augment.rotate);
  const std::array<double, 3> jitter = parse_color_jitter(cfg.augment.color_jitter);
  a.brightness = static_cast<float>(jitter[0]);
  a.contrast = static_cast<float>(jitter[1]);
  a.saturation = static_cast<float>(jitter[2]);
  a.erase_p = static_cast<float>(cfg.augment.erase_p);
  a.seed = cfg.seed;
  a.mix.mixup = cfg.augment.mixup;
  a.mix.cutmix = cfg.augment.cutmix;
  a.mix.mix_prob = cfg.augment.mix_prob;
  a.mix.switch_prob = cfg.augment.switch_prob;
  a.mix.seed = cfg.seed;
  return a;
}

ObsOptions make_obs_options(const Config& cfg) {
  ObsOptions o;
  static_cast<LogSection&>(o) = cfg.log;
  o.model = cfg.model;
  o.device = cfg.device;
  o.precision = cfg.precision;
  o.version = version_string();
  return o;
}

void average_buffers(Backend& be, Net& net, Collectives* comm) {
  average_across_ranks(be, net.buffers(), net.num_buffers(), comm, "batch-norm running statistics");
}

void average_across_ranks(Backend& be, float* v, size_t n, Collectives* comm, const char* what) {
  if (!comm || n == 0) return;
  comm->allreduce_sum(v, n, what);
  be.scale(n, 1.f / static_cast<float>(comm->ranks()), v);
}

}  // namespace cnn
