#include "src/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace cnn {

namespace {

constexpr size_t kFrozen = static_cast<size_t>(-1);

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, Backend& be, Net& net) : Optimizer(c, be, net, {"momentum"}) {}
  void step(double lr) override {
    for (const Run& r : runs_)
      be_.sgd_update(r.size, net_.params() + r.offset, net_.grads() + r.offset, state_[0] + r.at,
                     static_cast<float>(lr * r.lr_mult), static_cast<float>(c_.momentum),
                     r.decay ? static_cast<float>(c_.weight_decay) : 0.f, c_.nesterov);
  }
};

class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerConfig& c, Backend& be, Net& net) : Optimizer(c, be, net, {"exp_avg", "exp_avg_sq"}) {}
  void step(double lr) override {
    ++t_;
    const float bc1 = static_cast<float>(1.0 - std::pow(c_.beta1, static_cast<double>(t_)));
    const float bc2 = static_cast<float>(1.0 - std::pow(c_.beta2, static_cast<double>(t_)));
    for (const Run& r : runs_)
      be_.adamw_update(r.size, net_.params() + r.offset, net_.grads() + r.offset, state_[0] + r.at,
                       state_[1] + r.at, static_cast<float>(lr * r.lr_mult), static_cast<float>(c_.beta1),
                       static_cast<float>(c_.beta2), static_cast<float>(c_.eps),
                       r.decay ? static_cast<float>(c_.weight_decay) : 0.f, bc1, bc2);
  }
  int64_t steps() const override { return t_; }
  void set_steps(int64_t t) override { t_ = t; }

 private:
  int64_t t_ = 0;
};

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& c, Backend& be, Net& net, std::vector<std::string> state_names)
    : c_(c), be_(be), net_(net), state_(state_names.size(), nullptr), names_(std::move(state_names)) {
  set_lr_mult(c.lr_mult);
}

Optimizer::~Optimizer() {
  for (float* s : state_)
    if (s) be_.release(s);
}

void Optimizer::set_lr_mult(const std::vector<float>& lr_mult) {
  const std::vector<ParamInfo>& table = net_.param_table();
  CNN_CHECK(lr_mult.empty() || lr_mult.size() == table.size(), "%zu learning-rate factors for %zu parameters",
            lr_mult.size(), table.size());
  c_.lr_mult = lr_mult;
  runs_.clear();
  std::vector<size_t> at(table.size(), kFrozen);
  size_t size = 0;
  for (size_t t = 0; t < table.size(); ++t) {
    const ParamInfo& p = table[t];
    const bool decay = p.decay || c_.decay_bn_bias;
    const float m = lr_mult.empty() ? 1.f : lr_mult[t];
    if (m == 0.f) continue;
    at[t] = size;
    if (!runs_.empty() && runs_.back().decay == decay && runs_.back().lr_mult == m &&
        runs_.back().offset + runs_.back().size == p.offset)
      runs_.back().size += p.size;
    else
      runs_.push_back({p.offset, p.size, size, decay, m});
    size += p.size;
  }
  if (at == at_) return;
  // Another set of trainable parameters: new arrays, the state of those that kept training copied over.
  for (float*& s : state_) {
    float* fresh = static_cast<float*>(be_.alloc(sizeof(float) * std::max<size_t>(1, size)));
    be_.fill(fresh, size, 0.f);
    for (size_t t = 0; s && t < table.size(); ++t)
      if (at[t] != kFrozen && at_[t] != kFrozen) be_.copy(fresh + at[t], s + at_[t], sizeof(float) * table[t].size);
    if (s) be_.release(s);
    s = fresh;
  }
  at_.swap(at);
  state_size_ = size;
}

void Optimizer::download_state(size_t k, float* host) const {
  std::fill(host, host + net_.num_params(), 0.f);
  for (const Run& r : runs_) be_.download(host + r.offset, state_[k] + r.at, sizeof(float) * r.size);
}

void Optimizer::upload_state(size_t k, const float* host) {
  for (const Run& r : runs_) be_.upload(state_[k] + r.at, host + r.offset, sizeof(float) * r.size);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net) {
  if (cfg.kind == "sgd") return std::make_unique<Sgd>(cfg, be, net);
  if (cfg.kind == "adamw") return std::make_unique<AdamW>(cfg, be, net);
  raise(kExitUsage, "unknown optimizer '%s' (--train.optimizer); available: sgd, adamw", cfg.kind.c_str());
}

}  // namespace cnn
