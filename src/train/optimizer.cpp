#include "src/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace cnn {

namespace {

struct Run {
  size_t offset, size;
  bool decay;
};

std::vector<Run> decay_runs(const Net& net, bool decay_all) {
  std::vector<Run> runs;
  for (const ParamInfo& p : net.param_table()) {
    const bool decay = p.decay || decay_all;
    if (!runs.empty() && runs.back().decay == decay && runs.back().offset + runs.back().size == p.offset)
      runs.back().size += p.size;
    else
      runs.push_back({p.offset, p.size, decay});
  }
  return runs;
}

float* zeroed(Backend& be, size_t n) {
  float* p = static_cast<float*>(be.alloc(sizeof(float) * std::max<size_t>(1, n)));
  be.fill(p, n, 0.f);
  return p;
}

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, Backend& be, Net& net)
      : c_(c), be_(be), net_(net), runs_(decay_runs(net, c.decay_bn_bias)), v_(zeroed(be, net.num_params())) {}
  ~Sgd() override { be_.release(v_); }
  void step(double lr) override {
    for (const Run& r : runs_)
      be_.sgd_update(r.size, net_.params() + r.offset, net_.grads() + r.offset, v_ + r.offset,
                     static_cast<float>(lr), static_cast<float>(c_.momentum),
                     r.decay ? static_cast<float>(c_.weight_decay) : 0.f, c_.nesterov);
  }
  std::vector<std::pair<std::string, float*>> state() override { return {{"momentum", v_}}; }

 private:
  OptimizerConfig c_;
  Backend& be_;
  Net& net_;
  std::vector<Run> runs_;
  float* v_ = nullptr;
};

class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerConfig& c, Backend& be, Net& net)
      : c_(c), be_(be), net_(net), runs_(decay_runs(net, c.decay_bn_bias)), m_(zeroed(be, net.num_params())),
        v_(zeroed(be, net.num_params())) {}
  ~AdamW() override {
    be_.release(m_);
    be_.release(v_);
  }
  void step(double lr) override {
    ++t_;
    const float bc1 = static_cast<float>(1.0 - std::pow(c_.beta1, static_cast<double>(t_)));
    const float bc2 = static_cast<float>(1.0 - std::pow(c_.beta2, static_cast<double>(t_)));
    for (const Run& r : runs_)
      be_.adamw_update(r.size, net_.params() + r.offset, net_.grads() + r.offset, m_ + r.offset, v_ + r.offset,
                       static_cast<float>(lr), static_cast<float>(c_.beta1), static_cast<float>(c_.beta2),
                       static_cast<float>(c_.eps), r.decay ? static_cast<float>(c_.weight_decay) : 0.f, bc1, bc2);
  }
  std::vector<std::pair<std::string, float*>> state() override { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }
  int64_t steps() const override { return t_; }
  void set_steps(int64_t t) override { t_ = t; }

 private:
  OptimizerConfig c_;
  Backend& be_;
  Net& net_;
  std::vector<Run> runs_;
  float *m_ = nullptr, *v_ = nullptr;
  int64_t t_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net) {
  if (cfg.kind == "sgd") return std::make_unique<Sgd>(cfg, be, net);
  if (cfg.kind == "adamw") return std::make_unique<AdamW>(cfg, be, net);
  raise(kExitUsage, "unknown optimizer '%s' (--train.optimizer); available: sgd, adamw", cfg.kind.c_str());
}

}  // namespace cnn
