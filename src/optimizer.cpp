#include "src/optimizer.h"

#include <algorithm>

#include "src/error.h"

namespace cnn {

namespace {

struct Run {
  size_t offset, size;
  bool decay;
};

std::vector<Run> decay_runs(const Net& net) {
  std::vector<Run> runs;
  for (const ParamInfo& p : net.param_table()) {
    if (!runs.empty() && runs.back().decay == p.decay && runs.back().offset + runs.back().size == p.offset)
      runs.back().size += p.size;
    else
      runs.push_back({p.offset, p.size, p.decay});
  }
  return runs;
}

class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, Backend& be, Net& net) : c_(c), be_(be), net_(net), runs_(decay_runs(net)) {
    v_ = static_cast<float*>(be.alloc(sizeof(float) * std::max<size_t>(1, net.num_params())));
    be.fill(v_, net.num_params(), 0.f);
  }
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

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& cfg, Backend& be, Net& net) {
  if (cfg.kind == "sgd") return std::make_unique<Sgd>(cfg, be, net);
  raise(kExitUsage, "unknown optimizer '%s' (--train.optimizer); available: sgd", cfg.kind.c_str());
}

}  // namespace cnn
