#include "src/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace cnn {

namespace {

float* zeroed(Backend& be, size_t n) {
  float* p = static_cast<float*>(be.alloc(sizeof(float) * std::max<size_t>(1, n)));
  be.fill(p, n, 0.f);
  return p;
}

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, Backend& be, Net& net) : Optimizer(c, net), be_(be), v_(zeroed(be, net.num_params())) {}
  ~Sgd() override { be_.release(v_); }
  void step(double lr) override {
    for (const Run& r : runs_)
      be_.sgd_update(r.size, net_.params() + r.offset, net_.grads() + r.offset, v_ + r.offset,
                     static_cast<float>(lr * r.lr_mult), static_cast<float>(c_.momentum),
                     r.decay ? static_cast<float>(c_.weight_decay) : 0.f, c_.nesterov);
  }
  std::vector<std::pair<std::string, float*>> state() override { return {{"momentum", v_}}; }

 private:
  Backend& be_;
  float* v_ = nullptr;
};

class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerConfig& c, Backend& be, Net& net)
      : Optimizer(c, net), be_(be), m_(zeroed(be, net.num_params())), v_(zeroed(be, net.num_params())) {}
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
                       static_cast<float>(lr * r.lr_mult), static_cast<float>(c_.beta1), static_cast<float>(c_.beta2),
                       static_cast<float>(c_.eps), r.decay ? static_cast<float>(c_.weight_decay) : 0.f, bc1, bc2);
  }
  std::vector<std::pair<std::string, float*>> state() override { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }
  int64_t steps() const override { return t_; }
  void set_steps(int64_t t) override { t_ = t; }

 private:
  Backend& be_;
  float *m_ = nullptr, *v_ = nullptr;
  int64_t t_ = 0;
};

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& c, Net& net) : c_(c), net_(net) { set_lr_mult(c.lr_mult); }

void Optimizer::set_lr_mult(const std::vector<float>& lr_mult) {
  const std::vector<ParamInfo>& table = net_.param_table();
  CNN_CHECK(lr_mult.empty() || lr_mult.size() == table.size(), "%zu learning-rate factors for %zu parameters",
            lr_mult.size(), table.size());
  c_.lr_mult = lr_mult;
  runs_.clear();
  for (size_t t = 0; t < table.size(); ++t) {
    const ParamInfo& p = table[t];
    const bool decay = p.decay || c_.decay_bn_bias;
    const float m = lr_mult.empty() ? 1.f : lr_mult[t];
    if (m == 0.f) continue;
    if (!runs_.empty() && runs_.back().decay == decay && runs_.back().lr_mult == m &&
        runs_.back().offset + runs_.back().size == p.offset)
      runs_.back().size += p.size;
    else
      runs_.push_back({p.offset, p.size, decay, m});
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net) {
  if (cfg.kind == "sgd") return std::make_unique<Sgd>(cfg, be, net);
  if (cfg.kind == "adamw") return std::make_unique<AdamW>(cfg, be, net);
  raise(kExitUsage, "unknown optimizer '%s' (--train.optimizer); available: sgd, adamw", cfg.kind.c_str());
}

}  // namespace cnn
