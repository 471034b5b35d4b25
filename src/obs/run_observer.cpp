#include "src/obs/run_observer.h"

#include <cmath>
#include <vector>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/obs/rank_report.h"

namespace cnn {

RunObserver::RunObserver(const Config& cfg, Backend& be, Net& net, RunLog& log)
    : cfg_(cfg), be_(be), net_(net), log_(log), hosts_(gather_host_names()), timing_(be, world_rank()) {}

void RunObserver::begin(const std::string& run_dir, int64_t start, int64_t total, int64_t spe) {
  if (world_rank() == 0 && cfg_.log_tensorboard) {
    tb_ = std::make_unique<TensorBoardLog>();
    tb_->open(run_dir, host_name(), start);
    log_.set_event_sink([this](const Json& j) { tb_->write(j); });
    log_.info("TensorBoard: %s (tensorboard --logdir %s)", tb_->file().path().c_str(), run_dir.c_str());
  }
  progress_ = std::make_unique<Progress>(log_, world_rank() == 0 && progress_bar_wanted(cfg_.log_progress), start,
                                         total, spe);
}

void RunObserver::after_step(int64_t done, double loss) {
  ++steps_since_;
  timing_.poll();
  if (progress_) progress_->on_step(done, loss);
}

void RunObserver::add_train_fields(Json& j, int64_t done, double grad_norm) {
  if (grad_norm < 0) grad_norm = std::sqrt(be_.sum_squares(net_.num_params(), net_.grads()));
  const Eta e = progress_->eta(done);
  const MemoryUse m = be_.memory_use();
  j.add("grad_norm", grad_norm).add("elapsed_s", e.elapsed).add("eta_epoch_s", e.epoch).add("eta_s", e.run)
      .add("mem_in_use", static_cast<double>(m.in_use)).add("mem_peak", static_cast<double>(m.peak));
}

std::string RunObserver::eta_text(int64_t done) const {
  const Eta e = progress_->eta(done);
  return strprintf(" | elapsed %s, ETA epoch %s, run %s", format_duration(e.elapsed).c_str(),
                   format_duration(e.epoch).c_str(), format_duration(e.run).c_str());
}

void RunObserver::log_ranks(int64_t done) {
  RankSample mine;
  mine.phase = timing_.take();
  const MemoryUse m = be_.memory_use();
  mine.mem_in_use = static_cast<double>(m.in_use);
  mine.mem_peak = static_cast<double>(m.peak);
  read_process_memory(&mine.rss, &mine.rss_peak);
  mine.steps = steps_since_;
  steps_since_ = 0;
  const std::vector<RankSample> all = gather_rank_samples(mine);
  const std::vector<Straggler> slow = find_stragglers(all, cfg_.log_straggler_pct);
  for (const Straggler& s : slow) log_.warn("%s", describe_straggler(s, hosts_).c_str());
  log_.event(ranks_event(done, all, slow));
}

void RunObserver::maybe_histograms(int64_t done) {
  if (!tb_ || cfg_.log_histograms_every <= 0 || done % cfg_.log_histograms_every != 0) return;
  const size_t n = net_.num_params();
  std::vector<float> w(n), g(n);
  be_.download(w.data(), net_.params(), sizeof(float) * n);
  be_.download(g.data(), net_.grads(), sizeof(float) * n);
  for (const ParamInfo& p : net_.param_table()) {
    tb_->file().histogram("weights/" + p.name, done, w.data() + p.offset, p.size);
    tb_->file().histogram("grads/" + p.name, done, g.data() + p.offset, p.size);
  }
  tb_->file().flush();
}

void RunObserver::finish() {
  if (progress_) progress_->finish();
}

}  // namespace cnn
